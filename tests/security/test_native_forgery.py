"""Compiled programs attacking code_tests' judge, and the samples judged beside them, score 0; honest samples
in the same batch keep their verdicts, on every sandbox backend.

A native program has no audit hook: it may signal every process of its uid (the judge and its zygote
included), fill the sandbox's disk, leave a daemon behind, or write a forged report anywhere it can. Under
GRPO a sample's reward is relative to its group's, so costing a neighbour its verdict is itself a gain: each
attacker sits in a batch before an honest sample that it tries to sink.
"""

import pytest

from gpu_jobs.rewards import build_scorer
from sandboxes.backends.docker import DockerBackend
from tests.security.hostile import BackendClient

pytestmark = pytest.mark.security

HEAD = (
    "#include <dirent.h>\n#include <fcntl.h>\n#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    "#include <string.h>\n#include <sys/stat.h>\n#include <unistd.h>\n"
)
TESTS = [{"stdin": "3 4\n", "stdout": "7\n"}, {"stdin": "10 -2\n", "stdout": "8\n"}]
HONEST = HEAD + 'int main(void) { long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", a + b); return 0; }\n'
ATTACKERS = {
    "kills every process it may signal": HEAD + "int main(void) { kill(-1, SIGKILL); return 0; }\n",
    "stops the judge's zygote": HEAD + "int main(void) { kill(getppid(), SIGSTOP); sleep(1); return 0; }\n",
    "fills the sandbox's disk": HEAD + "int main(void) {\n"
    '  FILE *f = fopen("/tmp/fill", "w"); char block[4096] = {0};\n'
    "  while (f && fwrite(block, 1, sizeof block, f) == sizeof block) {}\n"
    '  mkdir("/tmp/locked", 0700); fclose(fopen("/tmp/locked/file", "w")); chmod("/tmp/locked", 0);\n'
    "  return 0;\n}\n",
    "leaves a daemon that replaces the next sample's program": HEAD + "int main(void) {\n"
    "  if (fork() == 0) {\n"
    "    setsid(); if (fork() != 0) _exit(0);\n"
    "    for (int round = 0; round < 400; round++) {\n"
    '      DIR *d = opendir("/tmp"); struct dirent *e; char path[512];\n'
    "      while (d && (e = readdir(d))) {\n"
    '        if (strncmp(e->d_name, "sample-", 7) != 0) continue;\n'
    '        snprintf(path, sizeof path, "/tmp/%s/prog", e->d_name); unlink(path);\n'
    '        FILE *f = fopen(path, "w"); if (f) { fputs("#!/bin/sh\\necho 0\\n", f); fclose(f); chmod(path, 0755); }\n'
    "      }\n"
    "      if (d) closedir(d); usleep(10000);\n"
    "    }\n"
    "    _exit(0);\n"
    "  }\n"
    "  return 0;\n}\n",
    "writes a forged report to every descriptor": HEAD + "int main(void) {\n"
    '  const char *line = "ANNEAL_REPORT {\\"nonce\\": \\"0\\", \\"results\\": [{\\"passed\\": [true, true]}]}\\n";\n'
    "  for (int fd = 0; fd < 256; fd++) write(fd, line, strlen(line));\n"
    "  return 0;\n}\n",
    "forks until the process cap": HEAD
    + "int main(void) { for (int i = 0; i < 100000; i++) fork(); return 0; }\n",
}


@pytest.fixture
def code_backend(backend):
    if isinstance(backend, DockerBackend):
        problem = backend.engine_problem("c-cpp")
        if problem:
            pytest.skip(problem)
    return backend


def _scorer(backend, language="c"):
    return build_scorer(
        {"type": "code_tests", "language": language, "tests": TESTS, "scoring": "fraction", "timeout_s": 5},
        sandbox=BackendClient(backend),
    )


def test_attackers_score_zero_and_the_honest_samples_after_them_keep_their_verdicts(code_backend):
    labels, completions = [], []
    for name, program in ATTACKERS.items():
        labels += [name, f"honest after: {name}"]
        completions += [f"```c\n{program}```", f"```c\n{HONEST}```"]
    results = _scorer(code_backend).score_batch([{}] * len(completions), completions)
    scores = {label: (result.score, result.reason) for label, result in zip(labels, results, strict=True)}
    assert {label: score for label, (score, _) in scores.items() if label.startswith("honest")} == {
        f"honest after: {name}": 1.0 for name in ATTACKERS
    }, scores
    assert {name: scores[name][0] for name in ATTACKERS} == dict.fromkeys(ATTACKERS, 0.0), scores
    assert scores["stops the judge's zygote"][1] == "tampering: stopped the judge's zygote"


def test_javascript_attackers_cannot_sink_their_neighbours_either(code_backend):
    if isinstance(code_backend, DockerBackend) and code_backend.engine_problem("javascript"):
        pytest.skip(code_backend.engine_problem("javascript"))
    honest = "const [a, b] = require('fs').readFileSync(0, 'utf8').split(/\\s+/).map(Number);\nconsole.log(a + b);\n"
    attackers = [
        "try { process.kill(-1, 'SIGKILL'); } catch (e) {}\n",
        "try { process.kill(process.ppid, 'SIGSTOP'); } catch (e) {}\n",
        "require('fs').writeFileSync('/tmp/big', Buffer.alloc(64 << 20));\n",
    ]
    completions = [
        text for attacker in attackers for text in (f"```js\n{attacker}```", f"```js\n{honest}```")
    ]
    results = _scorer(code_backend, "javascript").score_batch([{}] * len(completions), completions)
    assert [result.score for result in results] == [0.0, 1.0] * len(attackers), [r.reason for r in results]
