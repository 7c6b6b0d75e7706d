"""Programs in languages other than Python (C, C++, JavaScript): built and run by the zygote as processes of
their own, their outputs judged by the judge (sent as native.py; standard library only).

The zygote never runs the program in its own process: for each step it forks a child that execs a toolchain
(gcc, g++, node) or the built program, on descriptors it made itself (stdin a memfd; stdout, stderr and, for
calls, a reply pipe), every other descriptor closed, in a folder of the sample's own under /tmp. A native
program has no audit hook, so the trust rests on processes alone: the judge and the zygote are non-dumpable
(boot.py; exec makes only the program's own process dumpable again), so it can read neither their memory
nor their descriptors; it never holds the report channel, the nonce or an expected value. What it can still
do (kill or stop them: the same uid) loses the run its report, or the batch its zygote, and the verifier then
judges the samples left in runs of their own (python_tests.score_batch), so one sample cannot cost another its
verdict. After each sample the zygote empties /tmp of what the sample wrote (`wipe`; in a sandbox only: run
unsandboxed, as the benchmark's baseline runs the judge, it removes its own folders and nothing else).

JavaScript calls: CALL_DRIVER runs the program as a script (so its top-level functions, `const`s and classes
are reachable by name), calls each function with JSON arguments and writes one JSON reply per call to
descriptor 3. The program shares that process, so a reply is only ever the program's own claim of a value:
the judge compares it with the expected value, which never leaves the judge.
"""

import json
import os
import shutil
import stat
import time

import runner

TMP = "/tmp"
KEEP = {"work": {"main.py"}}  # the fork server's working directory and the judge's own main program
MADE = []  # the sample folders this zygote made, removed by wipe()
WORK = os.path.join(TMP, "work")
MAIN = os.path.join(WORK, "main.py")
KEPT = {}  # path -> how remember() found it (_looks), for wipe() to put back
KEPT_MAIN = []  # the main program's content, as remember() found it
SYSV_KINDS = ("shm", "sem", "msg")
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
REPLY_FD = 3
OUTPUT_CAP = 1 << 20
# How each language is built and run, in the sample's folder. C and C++ get the same optimisation a contest
# judge gives them; the C++ one needs no header cache (bits/stdc++.h alone costs about 3 s to compile).
LANGUAGES = {
    "c": {
        "source": "main.c",
        "build": ["/usr/bin/gcc", "-O2", "-std=c17", "-pipe", "-o", "prog", "main.c", "-lm"],
        "run": ["./prog"],
    },
    "cpp": {
        "source": "main.cpp",
        "build": ["/usr/bin/g++", "-O2", "-std=c++17", "-pipe", "-o", "prog", "main.cpp"],
        "run": ["./prog"],
    },
    "javascript": {"source": "main.js", "build": None, "run": ["/usr/bin/node", "main.js"]},
}
CALL_DRIVER = r"""
const fs = require('fs');
const vm = require('vm');
const calls = JSON.parse(fs.readFileSync('anneal_calls.json', 'utf8'));
const source = fs.readFileSync('main.js', 'utf8');
const write = fs.writeSync;
const stringify = JSON.stringify;
const reply = (message) => write(3, stringify(message) + '\n');
try {
  vm.runInThisContext(source, { filename: 'main.js' });
} catch (error) {
  reply({ error: String(error && error.name ? error.name + ': ' + error.message : error) });
  process.exit(0);
}
for (let index = 0; index < calls.length; index++) {
  const call = calls[index];
  let fn;
  try { fn = vm.runInThisContext(call.fn); } catch (error) { fn = undefined; }
  if (typeof fn !== 'function') { reply({ i: index, missing: true }); continue; }
  let value;
  try {
    value = fn(...call.args);
  } catch (error) {
    reply({ i: index, raised: String(error && error.message !== undefined ? error.message : error) });
    continue;
  }
  let text;
  try { text = stringify(value === undefined ? null : value); } catch (error) { text = undefined; }
  if (text === undefined) { reply({ i: index, not_plain: typeof value }); continue; }
  write(3, '{"i":' + index + ',"value":' + text + '}\n');
}
"""


def run_exec(job):
    """In the zygote: write job["files"] into job["dir"] (made if new), fork, exec job["argv"] there on
    job["stdin"], collect its output until it exits or job["time_s"] runs out. {"stdout", "stderr",
    ["replies",] "timed_out", "flooded", "exit"}."""
    folder = job["dir"]
    try:
        if not os.path.lexists(folder):
            os.mkdir(folder, 0o700)
            MADE.append(folder)
        for name, content in (job.get("files") or {}).items():
            fd = os.open(
                os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
            )
            with open(fd, "w", encoding="utf-8") as f:
                f.write(content)
    except OSError as exc:
        return {"stdout": "", "stderr": f"could not write the program's files: {exc}", "timed_out": False,
                "flooded": False, "exit": "not started"}  # fmt: skip
    stdin_fd = os.memfd_create("stdin", 0)
    os.write(stdin_fd, job.get("stdin", "").encode())
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    names = ("stdout", "stderr", *(("replies",) if job.get("replies") else ()))
    pipes = {name: os.pipe() for name in names}
    pid = os.fork()
    if pid == 0:
        _exec_child(job, folder, stdin_fd, pipes)
    os.close(stdin_fd)
    for _, write_end in pipes.values():
        os.close(write_end)
    result = runner.collect(
        {name: read_end for name, (read_end, _) in pipes.items()},
        time.monotonic() + job["time_s"],
        OUTPUT_CAP,
    )
    if result["timed_out"] or result["flooded"]:
        _kill_group(pid)
    _, status = os.waitpid(pid, 0)
    _kill_group(pid)
    if os.WIFSIGNALED(status):
        result["exit"] = f"killed by signal {os.WTERMSIG(status)}"
    else:
        result["exit"] = f"exit code {os.waitstatus_to_exitcode(status)}"
    stderr = result["stderr"]  # a compiler's first error is at its head, a crash's at its tail
    result["stderr"] = stderr if len(stderr) <= 4000 else f"{stderr[:2000]}\n...\n{stderr[-2000:]}"
    return result


def _exec_child(job, folder, stdin_fd, pipes):
    try:
        os.setpgid(0, 0)
        os.chdir(folder)
        os.dup2(stdin_fd, 0)
        os.dup2(pipes["stdout"][1], 1)
        os.dup2(pipes["stderr"][1], 2)
        if "replies" in pipes:
            os.dup2(pipes["replies"][1], REPLY_FD)
        os.closerange(REPLY_FD + 1 if "replies" in pipes else 3, 1 << 16)
        os.execve(job["argv"][0], job["argv"], {**ENV, "HOME": folder, "TMPDIR": folder})
    except BaseException as exc:  # noqa: BLE001 - whatever failed, the child must not return into the zygote
        try:
            os.write(2, f"could not start {job['argv'][0]}: {exc}\n".encode())
        except OSError:
            pass
    os._exit(127)


def remember():
    """In the zygote, before the first sample, in a sandbox only: how the paths wipe() keeps look (KEEP: /tmp,
    its work folder and the judge's main program), so that wipe() can put back what a sample changed of them."""
    if os.environ.get("SANDBOX_TMP") != TMP:
        return
    for path in (TMP, WORK, MAIN):
        try:
            KEPT[path] = _looks(path)
        except OSError:
            pass  # not there (another layout): nothing of it to keep
    try:
        KEPT_MAIN.append(_content(MAIN))
    except OSError:
        pass


def wipe(remove_sysv=None):
    """Remove the sample folders made so far and, in a sandbox (SANDBOX_TMP names its /tmp, which is the run's
    own), everything else a sample left for the next one to read: files in /tmp but the fork server's working
    directory and the judge's main program; the modes, times and extended attributes it set on those
    (remember()); the System V objects it made (`remove_sysv(kind, id)`: the zygote's, which holds ctypes).
    True when that is done; False when it cannot be put back (the main program rewritten or replaced, a kept
    folder swapped), and the judge then judges the samples left in runs of their own. Run unsandboxed (the
    benchmark's baseline), the judge touches nothing but its own folders. A program may have made its files
    read-only: they are its own, so the permissions are put back first."""
    try:
        while MADE:
            folder = MADE.pop()
            if os.path.lexists(folder):
                _remove(folder)
        if os.environ.get("SANDBOX_TMP") != TMP:
            return True  # unsandboxed
        if not _only_kept():  # the usual case skips this: the sample left no file (two directory reads)
            for entry in os.scandir(TMP):
                keep = KEEP.get(entry.name)
                if keep is not None and entry.is_dir(follow_symlinks=False):
                    for inner in os.scandir(entry.path):
                        if inner.name not in keep:
                            _remove(inner.path)
                else:
                    _remove(entry.path)
            if not _only_kept():
                return False
        return _put_back_kept() and _no_sysv_objects(remove_sysv)
    except OSError:
        return False


def _only_kept():
    """Nothing in /tmp but what KEEP names."""
    return all(name in KEEP for name in os.listdir(TMP)) and all(
        name in KEEP["work"] for name in os.listdir(WORK)
    )


def _looks(path):
    """What a program of the same uid can set on `path` and a later one read: (inode, mode, atime and mtime in
    ns, extended attributes). The inode tells a swapped file or folder; ctime, which nobody sets, is left out."""
    found = os.lstat(path)
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        names = []  # a file system without extended attributes: nothing to set there either
    attributes = {name: os.getxattr(path, name, follow_symlinks=False) for name in names}
    return found.st_ino, found.st_mode, found.st_atime_ns, found.st_mtime_ns, attributes


def _content(path, size=1 << 20):
    """Up to `size` bytes of `path` (no more are asked for: a larger buffer costs its allocation per sample)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOATIME | os.O_NOFOLLOW)  # reading it must not change its atime
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _put_back_kept():
    """Put the kept paths' modes, times and extended attributes back as remember() found them; False when the
    main program's content changed or a kept path is another file now (neither can be put back here)."""
    if KEPT_MAIN and _content(MAIN, len(KEPT_MAIN[0]) + 1) != KEPT_MAIN[0]:
        return False
    for path, (inode, mode, atime, mtime, attributes) in KEPT.items():
        now = _looks(path)
        if now[0] != inode or stat.S_IFMT(now[1]) != stat.S_IFMT(mode):
            return False
        if now[1] != mode:
            os.chmod(path, stat.S_IMODE(mode))  # not a link: its type is the remembered one
        for name, value in now[4].items():
            if attributes.get(name) != value:
                os.removexattr(path, name, follow_symlinks=False)
        for name, value in attributes.items():
            if now[4].get(name) != value:
                os.setxattr(path, name, value, follow_symlinks=False)
        if now[2:4] != (atime, mtime):  # last: chmod and the attributes change no times but ctime
            try:
                os.utime(path, ns=(atime, mtime), follow_symlinks=False)
            except PermissionError:
                # Not ours (a container's /tmp is root's, sticky): its owner's times are out of reach, but
                # "now" is not, and a sample cannot choose it (it could its own files' add and remove times).
                os.utime(path)
    return True


def _no_sysv_objects(remove_sysv):
    """Remove the System V objects (shared memory, semaphores, message queues) a sample made: they live as long
    as the run's IPC namespace, past the process that made them. True once none is left."""
    found = {kind: _sysv_ids(kind) for kind in SYSV_KINDS}
    if not any(found.values()):
        return True  # the usual case: one read of each list
    if remove_sysv is None:
        return False
    for kind, idents in found.items():
        for ident in idents:
            remove_sysv(kind, ident)
    return not any(_sysv_ids(kind) for kind in SYSV_KINDS)


def _sysv_ids(kind):
    """The ids of this IPC namespace's System V objects of `kind` (sandboxes.backends.fork_server.sysv_ids, which
    the judge cannot import: it runs on the standard library alone)."""
    try:
        fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY)  # not open(): this runs after every sample
    except FileNotFoundError:
        return []  # a kernel without System V IPC
    try:
        chunks = [os.read(fd, 1 << 16)]
        while len(chunks[-1]) and chunks[0].count(b"\n") > 1:  # more than the header: read the rest
            chunks.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    lines = b"".join(chunks).decode().splitlines()[1:]  # a header, then one object a line; its id 2nd
    return [int(line.split()[1]) for line in lines if line.strip()]


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, stat.S_IRWXU)
        for root, folders, _ in os.walk(path):
            for name in folders:
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    os.chmod(full, stat.S_IRWXU)
        shutil.rmtree(path)
    else:
        os.unlink(path)


def calls_file(tests):
    """What CALL_DRIVER reads: the call tests' functions and arguments (never their expected values)."""
    return json.dumps([{"fn": test["fn"], "args": test["args"]} for test in tests])


def _kill_group(pid):
    try:
        os.killpg(pid, 9)
    except OSError:
        pass
