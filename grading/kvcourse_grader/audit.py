"""What a student's code did while it was graded, seen by behaviour rather than by names.

The static review (:mod:`kvcourse_grader.review`) reads a submission's source, so a computed name
(``__import__("line" + "cache")``) passes it. At autograde,
:class:`~kvcourse_grader.preprocessors.RobustExecute` installs, before any student code runs,
an audit hook (:func:`sys.addaudithook`; no later code can take one off) in the student's kernel
(:func:`install_code`). The hook keeps, in its closure, what each cell's code did:

* modules imported outside :data:`ALLOWED_MODULES` (the ``import`` event, and a watch on
  ``builtins.__import__`` for modules the kernel had loaded already, such as ``linecache``);
* files opened (reads under the Python installation, its site-packages and the course library
  are left out: imports cause them);
* ``sys.settrace`` and ``sys.setprofile``, ``sys._getframe`` (also through ``inspect``),
  ``compile``, ``exec`` and ``eval`` called by the student's code, code or function objects built;
* programs started, network connections, ``ctypes``, ``gc``'s walks of live objects, signals,
  files deleted, databases opened, an audit hook of the student's own.

An event counts when the code that caused it is the student's: the first frame outside the
standard library (for ``compile``, ``exec``, ``sys._getframe``: the direct caller) is a student
cell, or code the student compiled at run time. What third-party packages and the course library
do, and the instructor's cells (test cells and locked cells, whose frames are theirs), is not
counted; a student's function that a test cell calls is counted under the student's cell.

The grader talks to the hook without any name the student could rebind: every piece of code the
grader runs silently starts with a marker line holding a random token, and the hook reads it from
the ``compile`` event IPython raises for it. ``cell`` says which cell runs next, and ``read``
makes the hook put the whole record (as JSON) in one global that the grader's user expression
reads (:func:`read_code`, :data:`READ_EXPRESSION`). The grader's own code runs unrecorded. A
student who breaks the channel (input transformers, a rebound global) only makes the read fail,
which the grader reports. :func:`describe` turns the record into the review's words;
:func:`notebook_flags` reads it back from an autograded notebook (``metadata.kvcourse.behaviour``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = [
    "ALLOWED_MODULES",
    "AUDIT_FILE",
    "behaviour_table",
    "describe",
    "enter_code",
    "install_code",
    "marker",
    "merged",
    "metadata",
    "notebook_flags",
    "parse_read",
    "read_code",
    "read_expression",
    "resume_code",
    "stash_name",
]

#: Top-level modules a solution may import without a flag (what an ordinary solution uses).
ALLOWED_MODULES = frozenset(
    {
        "__future__",
        "kvcourse",
        "numpy",
        "torch",
        "triton",
        "scipy",
        "pandas",
        "matplotlib",
        "math",
        "cmath",
        "statistics",
        "fractions",
        "decimal",
        "numbers",
        "random",
        "collections",
        "itertools",
        "functools",
        "operator",
        "dataclasses",
        "typing",
        "typing_extensions",
        "types",
        "enum",
        "abc",
        "copy",
        "heapq",
        "bisect",
        "array",
        "struct",
        "string",
        "re",
        "textwrap",
        "time",
        "datetime",
        "json",
        "csv",
        "hashlib",
        "zlib",
        "contextlib",
        "warnings",
        "weakref",
        "queue",
        "pprint",
        "io",
        "os",
        "pathlib",
        "sys",
        "uuid",
        "tqdm",
    }
)

#: The file name the hook's own code is compiled under (its frames are the grader's).
AUDIT_FILE = "<kvcourse-audit>"

#: Events the hook records, with the rule that finds whose code caused them: "direct" (the
#: direct caller), "import" (the caller past importlib), "user" (the first frame outside the
#: standard library).
_RULES = {
    "compile": "direct",
    "exec": "direct",
    "sys._getframe": "direct",
    "sys._current_frames": "direct",
    "code.__new__": "direct",
    "function.__new__": "direct",
    "object.__setattr__": "direct",
    "import": "import",
}

#: What a label means, in the review's words; ``{}`` takes the details.
WORDS = {
    "import": "imported {}",
    "read": "read files {}",
    "write": "wrote files {}",
    "sys.settrace": "turned on a tracer (sys.settrace)",
    "sys.setprofile": "turned on a profiler (sys.setprofile)",
    "frames": "read the call stack ({})",
    "compile": "compiled code at run time ({})",
    "code": "built code or function objects ({})",
    "process": "started programs: {}",
    "socket": "opened network connections: {}",
    "ctypes": "used ctypes ({})",
    "gc": "walked live objects ({})",
    "audithook": "added an audit hook of its own",
    "signal": "sent signals ({})",
    "remove": "deleted or renamed files: {}",
    "database": "opened databases: {}",
    "tamper": "{}",
}

# The kernel side. Compiled in the kernel under AUDIT_FILE; everything lives in closures.
_KERNEL = r'''
def _kvcourse_audit_install(token, allowed, namespace):
    import builtins, json, os, site, sys, sysconfig, _thread
    import importlib.util
    marker = '# kvcourse-audit ' + token
    marker_b = marker.encode()
    stash = '_kvcourse_audit_' + token
    audit_file = AUDIT_FILE
    rules = RULES
    get_frame, get_ident = sys._getframe, _thread.get_ident
    original_import = builtins.__import__
    std = tuple({p.rstrip('/') + '/' for p in (sysconfig.get_path('stdlib'),
                 sysconfig.get_path('platstdlib')) if p})
    sites = set(site.getsitepackages() + [site.getusersitepackages()])
    sites.update(p for p in (sysconfig.get_path('purelib'), sysconfig.get_path('platlib')) if p)
    sites = tuple(p.rstrip('/') + '/' for p in sites if p)
    spec = importlib.util.find_spec('kvcourse')
    folders = (spec.submodule_search_locations or []) if spec else []
    library = tuple(p.rstrip('/') + '/' for p in folders)
    library += ('kvcourse.assignment_checks.harness', 'kvcourse_snapshot_server')
    system = std + sites + library + tuple({p.rstrip('/') + '/' for p in (
        sys.prefix, sys.base_prefix, sys.exec_prefix)}) + ('/dev/null',)
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    shell = '/IPython/core/interactiveshell.py'
    state = {'paused': True, 'cell': None, 'dropped': 0}
    files, info, record, seen, busy, notes = {}, {}, {}, set(), set(), []

    def note(cell, label, detail):
        if cell is None:
            return
        key = (cell, label, detail)
        if key in seen:
            return
        if len(seen) >= 400:
            state['dropped'] += 1
            return
        seen.add(key)
        details = record.setdefault(cell, {}).setdefault(label, [])
        if len(details) < 12:
            details.append(str(detail)[:160])
        else:
            state['dropped'] += 1

    def owner(frame, rule):
        """The cell whose code caused the event, or None (not the student's)."""
        unknown, depth = False, 0
        while frame is not None and depth < 80:
            depth += 1
            name = frame.f_code.co_filename
            if name.startswith('<frozen') and rule == 'direct':
                return None  # the import system compiling and running a module
            if name == audit_file or name.startswith('<frozen') or name.endswith(shell):
                frame = frame.f_back  # IPython wraps open() in the user's namespace
                continue
            if name.startswith(sites) or name.startswith(library):
                return None
            if name.startswith(std):
                if rule == 'user' or (rule == 'import' and '/importlib/' in name) or (
                    rule == 'direct' and name.endswith(('/inspect.py', '/traceback.py'))):
                    frame = frame.f_back
                    continue
                return None
            cell = files.get(name)
            if cell is None:  # code compiled at run time: whoever runs it is the student's
                unknown = True
                frame = frame.f_back
                continue
            return cell if unknown or info.get(cell, ('', ''))[1] == 'student' else None
        return state['cell'] if unknown else None

    def command(text):
        line = text.split('\n', 1)[0][len(marker):].strip()
        state['paused'] = True
        if line.startswith('cell '):
            index, kind, grade_id = json.loads(line[5:])
            state['cell'] = index
            info[index] = (grade_id, kind)
        elif line == 'resume':  # a snapshot: the student's code runs for the hidden tests
            state['paused'] = False
        elif line == 'read':
            if builtins.__dict__.get('__import__') is not importer:
                note(state['cell'], 'tamper', 'replaced the import function (builtins.__import__)')
            namespace[stash] = json.dumps({
                'cells': {str(c): {'grade_id': info.get(c, ('', ''))[0],
                                   'kind': info.get(c, ('', ''))[1], 'did': did}
                          for c, did in record.items()},
                'dropped': state['dropped']})

    def handle(event, args, frame):
        if event == 'compile':
            source, name = args[0], args[1]
            if isinstance(source, bytes) and source.startswith(marker_b):
                return command(source.decode('utf-8', 'replace'))
            if isinstance(source, str) and source.startswith(marker):
                return command(source)
            if isinstance(name, str) and ('/ipykernel_' in name or name.startswith('<ipython-in')):
                if isinstance(source, (str, bytes)) and state['cell'] is not None:
                    files.setdefault(name, state['cell'])
                    state['paused'] = False
        if state['paused']:
            return
        if event == 'open':
            path, mode = args[0], args[1]
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return
            if mode is None:
                writing = bool(args[2] & writes) if isinstance(args[2], int) else False
            else:
                writing = any(c in str(mode) for c in 'wax+')
            if not writing and path.startswith(system):
                return
            return note(owner(frame, 'user'), 'write' if writing else 'read', path)
        cell = owner(frame, rules.get(event, 'user'))
        if cell is None:
            return
        if event == 'import':
            top = str(args[0]).partition('.')[0]
            if top not in allowed:
                note(cell, 'import', args[0])
        elif event in ('compile', 'exec'):
            note(cell, 'compile', event)
        elif event in ('sys.settrace', 'sys.setprofile'):
            note(cell, event, '')
        elif event in ('sys._getframe', 'sys._current_frames'):
            note(cell, 'frames', event)
        elif event in ('code.__new__', 'function.__new__'):
            note(cell, 'code', event)
        elif event == 'object.__setattr__':
            note(cell, 'code', 'a function given other code (__code__)')
        elif event == 'subprocess.Popen':
            note(cell, 'process', ' '.join(map(str, args[1] or [args[0]]))[:100])
        elif event in ('os.system', 'os.exec', 'os.posix_spawn', 'os.spawn'):
            note(cell, 'process', str(args[0])[:100])
        elif event in ('os.fork', 'os.forkpty'):
            note(cell, 'process', event)
        elif event.startswith('socket.'):
            note(cell, 'socket', f'{event[7:]} {args[1]!r}'[:100])
        elif event.startswith('ctypes.'):
            note(cell, 'ctypes', event)
        elif event.startswith('gc.'):
            note(cell, 'gc', event)
        elif event == 'sys.addaudithook':
            note(cell, 'audithook', '')
        elif event in ('os.kill', 'os.killpg', 'signal.pthread_kill'):
            note(cell, 'signal', event)
        elif event in ('os.remove', 'os.rename', 'os.rmdir', 'shutil.rmtree'):
            note(cell, 'remove', str(args[0]))
        elif event == 'sqlite3.connect':
            note(cell, 'database', str(args[0]))

    watched = frozenset(('compile', 'exec', 'open', 'import', 'sys.settrace', 'sys.setprofile',
        'sys._getframe', 'sys._current_frames', 'code.__new__', 'function.__new__',
        'subprocess.Popen', 'os.system', 'os.exec', 'os.posix_spawn', 'os.spawn', 'os.fork',
        'os.forkpty', 'socket.connect', 'socket.bind', 'socket.sendto', 'sys.addaudithook',
        'os.kill', 'os.killpg', 'signal.pthread_kill', 'gc.get_objects', 'gc.get_referrers',
        'gc.get_referents', 'os.remove', 'os.rename', 'os.rmdir', 'shutil.rmtree',
        'sqlite3.connect', 'object.__setattr__'))

    def hook(event, args):
        if event not in watched and not event.startswith('ctypes.'):
            return
        if event == 'object.__setattr__' and (len(args) < 2 or args[1] != '__code__'):
            return  # raised for every attribute set on a class; only __code__ counts
        ident = get_ident()
        if ident in busy:
            return
        busy.add(ident)
        try:
            if event == 'compile' or not state['paused']:
                handle(event, args, get_frame(1))
        except Exception:
            pass
        finally:
            busy.discard(ident)

    def importer(name, globals=None, locals=None, fromlist=(), level=0):
        if (not state['paused'] and not level and isinstance(name, str)
                and name.partition('.')[0] not in allowed
                and (globals is None or globals.get('__name__') == '__main__')):
            ident = get_ident()
            if ident not in busy:
                busy.add(ident)
                try:
                    note(owner(get_frame(1), 'direct'), 'import', name)
                except Exception:
                    pass
                finally:
                    busy.discard(ident)
        return original_import(name, globals, locals, fromlist, level)

    sys.addaudithook(hook)
    builtins.__import__ = importer
'''


def marker(token: str) -> str:
    """The first line of every piece of code the grader runs silently once the hook is in."""
    return f"# kvcourse-audit {token}"


def install_code(token: str) -> str:
    """Silent code that installs the hook (run before any student code) and leaves no name."""
    source = _KERNEL.replace("AUDIT_FILE", repr(AUDIT_FILE)).replace("RULES", repr(_RULES))
    return (
        f"{marker(token)} install\n"
        "_kvcourse_audit_ns = {}\n"
        f"exec(compile({source!r}, {AUDIT_FILE!r}, 'exec'), _kvcourse_audit_ns)\n"
        f"_kvcourse_audit_ns['_kvcourse_audit_install']({token!r}, "
        f"frozenset({sorted(ALLOWED_MODULES)!r}), globals())\n"
        "del _kvcourse_audit_ns\n"
    )


def enter_code(token: str, index: int, kind: str, grade_id: str) -> str:
    """Silent code telling the hook that cell ``index`` (``kind`` "student" or "instructor")
    runs next."""
    return f"{marker(token)} cell {json.dumps([index, kind, grade_id or ''])}\npass\n"


def resume_code(token: str) -> str:
    """Silent code that has the hook record again in a snapshot of the kernel, where no cell
    of IPython's starts (:mod:`kvcourse_grader.snapshot_server`): what the student's code does
    while the hidden tests call it there is recorded like the rest."""
    return f"{marker(token)} resume\npass\n"


def merged(record: dict[str, Any] | None, other: dict[str, Any] | None) -> dict[str, Any] | None:
    """``record`` with what ``other`` (a snapshot's record, which began as a copy of it) adds:
    per cell, every finding of either (at most 12 per kind of finding, as the hook keeps)."""
    if record is None or other is None:
        return record or other
    cells = {key: dict(entry) for key, entry in record.get("cells", {}).items()}
    for key, entry in other.get("cells", {}).items():
        into = cells.setdefault(key, {**entry, "did": {}})
        did = {label: list(found) for label, found in into.get("did", {}).items()}
        for label, found in (entry.get("did") or {}).items():
            kept = did.setdefault(label, [])
            kept += [item for item in found if item not in kept][: max(0, 12 - len(kept))]
        into["did"] = did
    dropped = max(record.get("dropped", 0), other.get("dropped", 0))
    return {"cells": cells, "dropped": dropped}


def read_code(token: str) -> str:
    """Silent code that makes the hook put its record in the global :func:`read_expression`
    reads."""
    return f"{marker(token)} read\npass\n"


def stash_name(token: str) -> str:
    """The global the hook puts its record in when told ``read``."""
    return f"_kvcourse_audit_{token}"


def read_expression(token: str) -> str:
    """The user expression that hands the record back (and removes the global)."""
    return f"globals().pop({stash_name(token)!r}, '')"


def parse_read(text: str) -> dict[str, Any] | None:
    """The record from the read expression's value, or None when it could not be read."""
    try:
        record = json.loads(text)
    except (TypeError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("cells"), dict) else None


def metadata(record: dict[str, Any] | None, unread_after: int | None) -> dict[str, Any]:
    """What the autograded notebook keeps (``metadata.kvcourse.behaviour``)."""
    record = record or {"cells": {}, "dropped": 0}
    return {"cells": record["cells"], "dropped": record.get("dropped", 0), "unread": unread_after}


def describe(behaviour: dict[str, Any]) -> list[str]:
    """The review's words for a behaviour record, one finding per cell, in cell order."""
    found = []
    cells = behaviour.get("cells") or {}
    for key in sorted(cells, key=lambda k: int(k) if str(k).isdigit() else -1):
        entry = cells[key]
        did = entry.get("did") or {}
        parts = []
        for label, words in WORDS.items():
            if label in did:
                details = [d for d in did[label] if d]
                parts.append(words.format(", ".join(details)) if "{}" in words else words)
        if parts:
            grade_id = entry.get("grade_id")
            where = f"cell {key}" + (f" (grade_id {grade_id})" if grade_id else "")
            found.append(f"{where}: {'; '.join(parts)}")
    if behaviour.get("dropped"):
        found.append(
            f"more behaviour than the record keeps ({behaviour['dropped']} event(s) left out)"
        )
    if behaviour.get("unread") is not None:
        found.append(
            f"cell {behaviour['unread']}: the behaviour record could not be read after it "
            "(the kernel or IPython was changed); later cells' behaviour is unknown"
        )
    return found


def notebook_flags(path: Path | str | dict) -> list[str]:
    """Review findings from the behaviour record of an autograded notebook (a path or its
    JSON); [] when it has none."""
    try:
        nb = path if isinstance(path, dict) else json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    behaviour = (nb.get("metadata") or {}).get("kvcourse", {}).get("behaviour")
    return describe(behaviour) if isinstance(behaviour, dict) else []


def behaviour_table(autograded: Path) -> list[list[str]]:
    """Rows ``student, assignment, behaviour`` (a header first) for every autograded notebook
    under ``autograded`` (``<student>/<assignment>/<assignment>.ipynb``) whose record names
    something; what ``kvcourse-grade export`` writes beside the grades for the instructor."""
    rows = [["student", "assignment", "behaviour"]]
    for path in sorted(Path(autograded).glob("*/*/*.ipynb")):
        student, assignment = path.parent.parent.name, path.parent.name
        if path.stem == assignment and (flags := notebook_flags(path)):
            rows.append([student, assignment, "; ".join(flags)])
    return rows
