"""The second layer of confinement for agent Python: an audit hook installed in the child before the agent's code.

The first layer is the operating system (bubblewrap.py). Inside it, the hook still refuses what no agent needs —
sockets, starting processes, signals, ctypes and other modules that reach memory or files unaudited, raising resource
limits, tracing, reads outside the working directory and the Python installation, writes outside the working
directory — so that an escape needs a way past both. On its own (the --unsafe-sandbox mode) it is not a sandbox: it
sees only what CPython audits (os.stat, os.mknod, os.mkfifo and signal.pidfd_send_signal are not audited, for one).
"""

# Third-party packages agent code may import besides the standard library (pure computation, no I/O of their own).
ALLOWED_PACKAGES = frozenset({"numpy", "pandas", "dateutil", "pytz", "tzdata", "six"})

# Standard-library modules that reach files, processes or memory outside Python's audited functions.
BLOCKED_MODULES = frozenset({
    "ctypes", "_ctypes", "_ctypes_test", "sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm", "_posixsubprocess",
    "_xxsubinterpreters", "_xxinterpchannels", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testimportmultiple", "_testclinic", "_xxtestfuzz", "_posixshmem", "_multiprocessing", "syslog", "readline",
    "_curses", "_curses_panel", "_tkinter", "ossaudiodev", "ssl", "_ssl", "spwd",
})

# Audit events always refused: network, processes, native code, raising limits, reaching the hook's own state.
DENIED_EVENTS = frozenset({
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg", "socket.sethostname",
    "subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "os.chdir", "os.link", "os.symlink", "pty.spawn", "webbrowser.open",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.cdata/buffer",
    "ctypes.call_function", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at",
    "resource.setrlimit", "resource.prlimit", "sys.settrace", "sys.setprofile",
    "cpython.PyEval_SetTrace", "cpython.PyEval_SetProfile", "cpython.PyInterpreterState_New",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "code.__new__", "marshal.load",
    "sqlite3.connect", "sqlite3.connect/handle", "sqlite3.enable_load_extension", "sqlite3.load_extension",
})

MAX_OPEN_FILES = 64
MAX_PROCESSES = 16

# Runs in the child before the agent's code. Everything the hooks use is bound as a default argument at definition
# (no global or closure lookups), so agent code cannot patch a module or builtin the check relies on; changing the
# defaults or code of a function is itself an audited event the hook refuses.
BOOTSTRAP = r'''
import sys


def _confine(config):
    import os, pathlib, posix, resource, stat, sysconfig, types, _posixsubprocess

    work = os.path.realpath(config["work"])
    for name, (soft, hard) in config["limits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))

    def no_processes(*args, **kwargs):
        raise PermissionError("sandbox: starting processes is not allowed")

    _posixsubprocess.fork_exec = no_processes  # the one way to spawn that raises no audit event of its own

    class StrPaths:
        """pathlib passes Path objects to os and io; the hook trusts only plain str paths, so give it those."""

        def __init__(self, module):
            self._module = module

        def __getattr__(self, name):
            value = getattr(self._module, name)
            if not isinstance(value, (types.BuiltinFunctionType, types.FunctionType)):
                return value

            def call(*args, **kwargs):
                return value(*[str(a) if isinstance(a, pathlib.PurePath) else a for a in args], **kwargs)

            return call

    def no_ctypes(name):
        raise AttributeError(f"ctypes.{name}: ctypes is not available in the sandbox")

    stub = types.ModuleType("ctypes", "Stand-in: pandas imports ctypes without using it off Windows.")
    stub.__getattr__ = no_ctypes
    sys.modules["ctypes"] = stub  # a real import of ctypes (or _ctypes) stays refused by the hook

    pathlib.os = StrPaths(os)
    pathlib.io = StrPaths(pathlib.io)

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sysconfig.get_paths().values()}
    read_roots = tuple(sorted({os.path.realpath(p) for p in prefixes} | {work, "/usr/share/zoneinfo"}))
    write_roots = (work,)
    read_files = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero"})
    write_files = frozenset({"/dev/null"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    modules = frozenset((set(sys.stdlib_module_names) | set(config["packages"])) - set(config["blocked"]))
    # (event, indexes of path arguments, indexes of dir_fd arguments); -1 is the default "no dir_fd".
    # Tuples and frozensets only: a denial's traceback shows the hook's locals, which must not be mutable.
    writes = (("os.mkdir", (0,), (2,)), ("os.remove", (0,), (1,)), ("os.rmdir", (0,), (1,)),
              ("os.rename", (0, 1), (2, 3)), ("os.truncate", (0,), ()), ("os.chmod", (0,), (2,)),
              ("os.chown", (0,), (3,)), ("os.utime", (0,), (3,)), ("os.setxattr", (0,), ()),
              ("os.removexattr", (0,), ()), ("os.chflags", (0,), ()), ("os.lchflags", (0,), ()))
    write_events = frozenset(event for event, _, _ in writes)
    # The code of the functions defined here: their defaults hold the policy, so nobody may replace them.
    own_code = frozenset(c for c in sys._getframe().f_code.co_consts if isinstance(c, types.CodeType))
    reads = frozenset({"os.listdir", "os.scandir", "os.getxattr", "os.listxattr", "shutil.copyfile"})

    def resolve(path, _work=work, _lstat=posix.lstat, _readlink=posix.readlink, _islink=stat.S_ISLNK,
                _str=str, _list=list, _reversed=reversed, _errors=(OSError, ValueError)):
        """The absolute path the kernel would reach, symlinks followed; None if they loop."""
        if not _str.startswith(path, "/"):
            path = _work + "/" + path
        pending = _list(_reversed(_str.split(path, "/")))
        parts = []
        hops = 0
        while pending:
            name = pending.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                if parts:
                    parts.pop()
                continue
            candidate = "/" + "/".join(parts + [name])
            try:
                mode = _lstat(candidate).st_mode
            except _errors:
                parts.append(name)
                continue
            if not _islink(mode):
                parts.append(name)
                continue
            hops += 1
            if hops > 40:
                return None
            target = _readlink(candidate)
            if _str.startswith(target, "/"):
                parts = []
            pending.extend(_reversed(_str.split(target, "/")))
        return "/" + "/".join(parts)

    def allowed(path, write, _resolve=resolve, _type=type, _issubclass=issubclass, _str=str, _bytes=bytes,
                _int=int, _read=read_roots, _write=write_roots, _read_files=read_files, _write_files=write_files):
        """Writes only in the working directory; reads there and in the Python installation."""
        kind = _type(path)
        if kind is _int:
            return True  # a descriptor: its path was checked when it was opened
        if path is None:
            path = "."
        elif _issubclass(kind, _bytes):
            path = _bytes.decode(path, "utf-8", "surrogateescape")
        elif _issubclass(kind, _str):
            path = "" + path  # an exact copy of the characters the kernel will get
        else:
            return False  # another os.PathLike could name one file here and another when the call converts it
        real = _resolve(path)
        if real is None:
            return False
        if real in (_write_files if write else _read_files):
            return True
        for root in (_write if write else _read):
            if real == root or _str.startswith(real, root + "/"):
                return True
        return False

    def hook(event, args, _allowed=allowed, _denied=frozenset(config["denied_events"]), _modules=modules,
             _writes=writes, _write_events=write_events, _reads=reads, _write_flags=write_flags, _type=type,
             _str=str, _int=int, _getattr=getattr, _own_code=own_code, _PermissionError=PermissionError,
             _ModuleNotFoundError=ModuleNotFoundError,
             _guarded_attributes=frozenset({"__code__", "__defaults__", "__kwdefaults__"})):
        if event in _denied:
            raise _PermissionError("sandbox: " + event + " is not allowed")
        if event == "import":
            name = "" + args[0]
            top = _str.partition(name, ".")[0]
            if top not in _modules:
                raise _ModuleNotFoundError("No module named '" + name + "' in the sandbox")
            if args[1] is not None and not _allowed(args[1], False):
                raise _PermissionError("sandbox: native module outside the Python installation: " + name)
        elif event == "open":
            path, mode, flags = args
            write = _type(flags) is _int and _int.__and__(flags, _write_flags) != 0
            if _type(mode) is _str:
                for letter in "wax+":
                    write = write or _str.__contains__(mode, letter)
            if not _allowed(path, write):
                raise _PermissionError("sandbox: no access to " + _str(_type(path).__name__) + " path outside "
                                       "the working directory (use plain str paths inside it)")
        elif event in _reads:
            if not _allowed(args[0], False):
                raise _PermissionError("sandbox: " + event + " outside the working directory")
        elif event in _write_events:
            for name, paths, dir_fds in _writes:
                if name != event:
                    continue
                for index in dir_fds:
                    if args[index] != -1:
                        raise _PermissionError("sandbox: " + event + " with dir_fd is not allowed")
                for index in paths:
                    if not _allowed(args[index], True):
                        raise _PermissionError("sandbox: " + event + " outside the working directory")
        elif (event == "object.__setattr__" and args[1] in _guarded_attributes
              and _getattr(args[0], "__code__", None) in _own_code):
            raise _PermissionError("sandbox: changing the sandbox's own functions is not allowed")

    sys.addaudithook(hook)


def _main():
    import builtins, json, traceback

    config = json.loads(sys.argv[1])
    with open("main.py", encoding="utf-8") as handle:
        code = compile(handle.read(), "main.py", "exec")
    _confine(config)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as error:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        sys.exit(1)


_main()
'''
