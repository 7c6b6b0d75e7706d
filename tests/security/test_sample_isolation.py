"""The samples of one batch share a sandbox run (the judge's zygote forks a runner per sample): nothing one
sample leaves behind reaches the next, on every backend. The zygote wipes /tmp after each sample; what stays
(/tmp, its work folder, the judge's main program) has its modes, times and extended attributes put back, the
System V objects a sample made are removed, the settings of the run's IPC and pid namespaces cannot be
written (/proc/sys is read-only), and a main program rewritten ends the run early: the samples after it are
judged in runs of their own, their verdicts kept."""

from gpu_jobs.rewards import build_scorer

PLANT = (
    "import os, subprocess\n"
    "def plant(what):\n"
    "    for path in ('/tmp', '/tmp/work', '/tmp/work/main.py'):\n"
    "        if what == 'metadata' and os.stat(path).st_uid == os.getuid():\n"
    "            os.chmod(path, 0o751)\n"
    "            os.utime(path, (12345, 12345))\n"
    "            os.setxattr(path, 'user.planted', b'1')\n"
    "    if what == 'metadata':\n"  # a folder made and removed: /tmp's mtime is the sample's to choose
    "        os.mkdir('/tmp/x')\n"
    "        os.rmdir('/tmp/x')\n"
    "        os.utime('/tmp/work', (12345, 12345))\n"
    "    if what == 'content':\n"
    "        open('/tmp/work/main.py', 'a').write('# planted')\n"
    "    if what == 'system v':\n"
    "        for flag in ('-M4096', '-Q', '-S1'):\n"
    "            subprocess.run(['ipcmk', flag], check=True, capture_output=True)\n"
    "    if what == 'settings':\n"  # the run's own IPC and pid namespaces' settings (the kernel allows it)
    "        for name, value in SETTINGS.items():\n"
    "            try:\n"
    "                open('/proc/sys/' + name, 'w').write(value)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return True\n"
)
SETTINGS = {
    "kernel/msgmax": "4242",
    "kernel/shmmni": "77",
    "fs/mqueue/queues_max": "77",
    "kernel/pid_max": "7777",
}
LOOK = (
    "import os\n"
    "def planted():\n"
    "    found = []\n"
    "    for path in ('/tmp', '/tmp/work', '/tmp/work/main.py'):\n"
    "        status = os.stat(path)\n"
    "        if status.st_mode & 0o777 == 0o751 or status.st_mtime == 12345 or os.listxattr(path):\n"
    "            found.append(path)\n"
    "    if open('/tmp/work/main.py').read().endswith('# planted'):\n"
    "        found.append('main.py content')\n"
    "    for kind in ('shm', 'sem', 'msg'):\n"
    "        if len(open(f'/proc/sysvipc/{kind}').read().splitlines()) > 1:\n"
    "            found.append(kind)\n"
    "    for name, value in SETTINGS.items():\n"
    "        if open('/proc/sys/' + name).read().strip() == value:\n"
    "            found.append(name)\n"
    "    return found\n"
)


class Counted:
    """The backend, counting the sandbox runs asked for."""

    def __init__(self, backend):
        self.backend, self.runs = backend, 0

    def run_many(self, requests):
        self.runs += len(requests)
        return self.backend.run_many(requests)


def judged(backend, what):
    sandbox = Counted(backend)
    scorer = build_scorer({"type": "python_tests"}, sandbox=sandbox)
    rows = [{"tests": [f"assert plant({what!r}) is True"]}, {"tests": ["assert planted() == []"]}]
    settings = f"SETTINGS = {SETTINGS!r}\n"
    results = scorer.score_batch(rows, [settings + PLANT, settings + LOOK])
    return [r.score for r in results], [r.reason for r in results], sandbox.runs


def test_modes_times_and_attributes_set_on_what_stays_are_put_back_within_the_run(backend):
    scores, reasons, runs = judged(backend, "metadata")
    assert scores == [1.0, 1.0], reasons
    assert runs == 1  # put back in place: the batch stayed one run


def test_system_v_objects_a_sample_makes_are_gone_within_the_run(backend):
    scores, reasons, runs = judged(backend, "system v")
    assert scores == [1.0, 1.0], reasons
    assert runs == 1


def test_namespace_settings_a_sample_tries_to_write_never_reach_the_next(backend):
    scores, reasons, runs = judged(backend, "settings")
    assert scores == [1.0, 1.0], reasons
    assert runs == 1


def test_a_rewritten_main_program_ends_the_run_and_the_next_sample_is_judged_in_one_of_its_own(backend):
    scores, reasons, runs = judged(backend, "content")
    assert scores == [1.0, 1.0], reasons
    assert runs == 2
