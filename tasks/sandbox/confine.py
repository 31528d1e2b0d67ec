"""Child-side confinement, applied by the trusted runner before it reads any untrusted code.

Why here and not in a Popen `preexec_fn`: the evaluator drives children from a thread pool,
and preexec_fn is documented as unsafe in a threaded parent (the child can deadlock).
The runner is a fresh single-threaded process, so it can unshare, mount and setuid freely.

Layers (each one tried, reported in the returned flags, never fatal):
  * root: new mount/net/pid/ipc/uts namespaces; every mount re-bound read-only and nosuid;
    a small tmpfs over the work dir (the only writable place, gone with the namespace);
    then a dedicated unprivileged uid (RLIMIT_NPROC works, signals to the evaluator fail).
  * not root: a user namespace with net/pid namespaces (no uid drop, no read-only fs).
  * rlimits always (address space, CPU, file size, open files, no core files).
"""
import ctypes
import os
import re
import resource

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
_KEEP = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
_libc = ctypes.CDLL(None, use_errno=True)


def _c(fn, *args):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{fn.__name__}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    enc = (lambda s: None if s is None else os.fsencode(s))
    _c(_libc.mount, enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


def _mounts():
    """(mount point, per-mount options) of this namespace, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
            out.append((point, parts[5].split(",")))
    return out


def _expose(paths):
    """Make `paths` reachable for an unprivileged uid (e.g. a Python under /root, mode 700).

    The first ancestor that others cannot search is covered by a tmpfs (hiding its other
    contents) and only the needed child directory is bound back into it.
    """
    wanted = {}
    for path in paths:
        parts = os.path.realpath(path).strip("/").split("/")
        for i in range(len(parts) - 1):
            anc = "/" + "/".join(parts[:i])
            if not os.stat(anc).st_mode & 0o001:
                wanted.setdefault(anc, set()).add(parts[i])
                break
    for anc, names in wanted.items():
        fds = {n: os.open(os.path.join(anc, n), os.O_PATH) for n in names}
        _mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        for n, fd in fds.items():
            os.mkdir(os.path.join(anc, n), 0o755)
            _mount(f"/proc/self/fd/{fd}", os.path.join(anc, n), None, MS_BIND | MS_REC)
            os.close(fd)


def _readonly_fs(workdir, uid, tmpfs_mb, expose):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we do here leaks to the host
    if expose:
        _expose(expose)
    root_ok = False
    for point, opts in _mounts():
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
        flags |= sum(v for k, v in _KEEP.items() if k in opts)
        try:
            _mount(None, point, None, flags)
            root_ok = root_ok or point == "/"
        except OSError:
            pass  # e.g. an overlapped mount point; "/" is what decides the flag
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,mode=0700{owner}")
    return root_ok


def _searchable(path):
    parts = os.path.realpath(path).strip("/").split("/")
    return all(os.stat("/" + "/".join(parts[:i])).st_mode & 0o001 for i in range(len(parts)))


def _become_init():
    """After CLONE_NEWPID the next child is the namespace's init: when it dies, the kernel
    kills every process left in the namespace (fork bombs included). The outer process only
    relays the exit status."""
    pid = os.fork()
    if pid == 0:
        return
    for fd in range(3, 256):  # drop our copy of the result pipe so EOF tracks the inner one
        try:
            os.close(fd)
        except OSError:
            pass
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def confine(cfg):
    """Apply isolation and limits to this process; returns the isolation flags.

    cfg keys: isolate (bool), workdir, uid (int|None), tmpfs_mb, memory_mb, cpu_s,
    fsize_mb, nofile, nproc, expose (paths the dropped uid must read: the Python install).
    """
    flags = {"network_isolation": False, "pid_namespace": False, "readonly_fs": False,
             "uid_drop": False, "proc_hidden": False, "notes": []}
    uid = cfg.get("uid")
    is_root = os.geteuid() == 0
    if cfg.get("isolate", True) and is_root:
        try:
            _c(_libc.unshare, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
               | CLONE_NEWUTS)
            flags.update(network_isolation=True, pid_namespace=True)
            flags["readonly_fs"] = _readonly_fs(cfg["workdir"], uid, cfg["tmpfs_mb"],
                                                cfg.get("expose") if uid is not None else None)
        except OSError as e:
            flags["notes"].append(f"namespaces: {e}")
    elif cfg.get("isolate", True):
        try:  # unprivileged: a user namespace lets us own net and pid namespaces
            me, grp = os.getuid(), os.getgid()
            _c(_libc.unshare, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
               | CLONE_NEWIPC)
            for name, text in (("setgroups", "deny"), ("uid_map", f"{me} {me} 1"),
                               ("gid_map", f"{grp} {grp} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            flags.update(network_isolation=True, pid_namespace=True)
        except OSError as e:
            flags["notes"].append(f"user namespace: {e}")
    if flags["pid_namespace"]:
        _become_init()
        try:  # a /proc of our own pid namespace: the evaluator's processes are not even listed
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            flags["proc_hidden"] = True
        except OSError as e:
            flags["notes"].append(f"/proc: {e}")
    os.chdir(cfg["workdir"])
    lim = resource.setrlimit
    mib = 1 << 20
    lim(resource.RLIMIT_AS, (cfg["memory_mb"] * mib,) * 2)
    lim(resource.RLIMIT_CPU, (cfg["cpu_s"], cfg["cpu_s"] + 1))
    lim(resource.RLIMIT_FSIZE, (cfg["fsize_mb"] * mib,) * 2)
    lim(resource.RLIMIT_NOFILE, (cfg["nofile"],) * 2)
    lim(resource.RLIMIT_CORE, (0, 0))
    if is_root and uid is not None:
        if flags["readonly_fs"] or all(_searchable(p) for p in cfg.get("expose", [])):
            lim(resource.RLIMIT_NPROC, (cfg["nproc"],) * 2)  # counted per uid: ours alone
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            flags["uid_drop"] = os.getuid() == uid and os.geteuid() == uid
        else:
            flags["notes"].append("uid drop skipped: Python install not readable by other users")
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid binaries cannot give root back
    die_with_parent()  # again: setuid clears it
    return flags


def die_with_parent():
    """SIGKILL this process when its parent dies (the evaluator, or the namespace's relay),
    so a killed evaluator leaves no sandbox behind."""
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
