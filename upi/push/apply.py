"""Safe replace on one or more hosts: compare, stage, validate, rename, relabel, reload.

Nothing is renamed into place until every target's new files are uploaded
and validated; a failure before that removes the staged copies and leaves
each host exactly as it was.
"""

from __future__ import annotations

import contextlib
import posixpath
import stat
from collections.abc import Callable

from upi.errors import UpiError
from upi.push.model import VALIDATED, FileStatus, Item, PushError, PushResult, Status, Step, TargetPlan
from upi.push.owned import Ledger, Stale, dump, find_stale, read_ledgers, removable, roots_of, updated, write
from upi.remote import Transport

Connect = Callable[[TargetPlan], Transport]
REMOVE = "remove files upi placed that the render no longer has"


def _output(res_out: str, res_err: str) -> str:
    text = (res_err + res_out).strip()
    return "\n".join("  " + line for line in text.splitlines()[-20:])


def _stat(t: Transport, paths: list[str]) -> dict[str, int]:
    """Each existing path's raw st_mode, the entry itself (a link is not followed)."""
    if not paths:
        return {}
    res = t.run(["stat", "-c", "%f %n", "--", *paths])
    if res.returncode not in (0, 1):
        raise PushError(f"{t.name}: `stat` failed (exit {res.returncode}):\n"
                        + _output(res.stdout, res.stderr))
    found = {}
    for line in res.stdout.splitlines():
        raw, _, path = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[path] = int(raw, 16)
    return found


def _digests(t: Transport, paths: list[str]) -> dict[str, str]:
    """sha256 of each readable regular file in `paths` (sha256sum; missing ones are left out)."""
    if not paths:
        return {}
    res = t.run(["sha256sum", "--", *paths])
    if res.returncode not in (0, 1):
        raise PushError(f"{t.name}: `sha256sum` failed (exit {res.returncode}):\n"
                        + _output(res.stdout, res.stderr))
    return {path: sha for sha, path in
            (line.split("  ", 1) for line in res.stdout.splitlines() if "  " in line)}


def _remote_state(t: Transport, items: list[Item]) -> dict[str, tuple[str, int]]:
    """Map each existing destination to its (sha256, mode); the files that exist on the host.

    Only regular files are read (a link, FIFO or device at a destination is
    never followed or opened: it reads as changed and is replaced, the entry
    itself); a directory there is refused.
    """
    modes = _stat(t, [i.dest for i in items])
    for path, raw in modes.items():
        if stat.S_ISDIR(raw):
            raise PushError(f"{t.name}: {path} is a directory where upi puts a file: nothing was "
                            "replaced; remove it")
    regular = [p for p, raw in modes.items() if stat.S_ISREG(raw)]
    digest = _digests(t, regular)
    return {p: (digest.get(p, ""), stat.S_IMODE(raw) if p in digest else -1)
            for p, raw in modes.items()}


def compare(t: Transport, plan: TargetPlan) -> list[tuple[Item, FileStatus]]:
    """Each item with its status on the host (sha256 and mode decide)."""
    state = _remote_state(t, plan.items)
    out = []
    for item in plan.items:
        found = state.get(item.dest)
        status: Status = ("new" if found is None else
                          "unchanged" if found == (item.sha256, item.mode) else "changed")
        out.append((item, FileStatus(plan.name, t.name, item.source, item.dest, status)))
    return out


def validation(item: Item) -> list[str] | None:
    """The real program that checks a staged service config, run on its host."""
    if item.kind == "dnsmasq":
        return ["dnsmasq", "--test", f"--conf-file={item.staged}"]
    if item.kind == "haproxy":
        return ["haproxy", "-c", "-f", item.staged]
    return None


def _check(t: Transport, argv: list[str], what: str) -> int:
    res = t.run(argv)
    if res.returncode != 0:
        raise PushError(f"{t.name}: {what} failed (exit {res.returncode}) running "
                        f"`{' '.join(argv)}`:\n" + _output(res.stdout, res.stderr))
    return res.returncode


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> [`/a`, `/a/b`, `/a/b/c`]."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def make_dirs(t: Transport, items: list[Item]) -> None:
    """Create the destination directories 0755 (whatever the umask), never through a link.

    Below each target root (tftp_root, http_root, ...) every directory on the
    way must be a real directory: a symbolic link there (which would send the
    files elsewhere) is refused before anything is written. The root and its
    parents may be links: that layout is the admin's choice. Missing ones are
    made one at a time, parent first, with `mkdir -m 755` (no -p: it would
    follow a link and take its modes from the umask).
    """
    below: set[str] = set()
    wanted: set[str] = set()
    for item in items:
        root = posixpath.normpath(item.root)
        head = posixpath.dirname(item.dest)
        if not (head == root or head.startswith(root.rstrip("/") + "/")):
            raise PushError(f"{item.dest} is not inside {root}: refused")  # pragma: no cover
        for d in _ancestors(head):
            wanted.add(d)
            if len(d) > len(root):
                below.add(d)
    found = _stat(t, sorted(wanted))
    for d in sorted(below):
        raw = found.get(d)
        if raw is not None and not stat.S_ISDIR(raw):
            what = "a symbolic link" if stat.S_ISLNK(raw) else "not a directory"
            raise PushError(f"{t.name}: {d} is {what}: upi never writes through it (files would "
                            "land outside the target root); nothing was replaced. Remove it")
    missing = sorted((d for d in wanted if d not in found), key=lambda d: (d.count("/"), d))
    if missing:
        _check(t, ["mkdir", "-m", "755", "--", *missing], "creating directories")


def stage(t: Transport, items: list[Item]) -> None:
    """Upload each item beside its destination, under a hidden temporary name, and check it arrived.

    A leftover or a link planted at the staging name is removed, never written
    through (the transports create with O_EXCL). Each staged copy is then read
    back on the host (sha256sum): a short or failed write is an error, before
    anything is replaced.
    """
    make_dirs(t, items)
    for item in items:
        t.write_file(item.staged, item.payload(), item.mode)
    got = _digests(t, [i.staged for i in items])
    for item in items:
        if got.get(item.staged) != item.sha256:
            raise PushError(f"{t.name}: the upload of {item.source} to {item.staged} is incomplete "
                            "or altered (sha256 differs; a full disk?): nothing was replaced")


def validate(t: Transport, plan: TargetPlan, items: list[Item], result: PushResult) -> None:
    """Run each staged config through its own program; the first failure stops the push."""
    for item in items:
        argv = validation(item)
        if argv is None:
            continue
        res = t.run(argv)
        result.steps.append(Step(plan.name, t.name, f"validate {item.source}", argv, res.returncode))
        if res.returncode != 0:
            why = "is not installed there" if res.returncode == 127 else "rejected it"
            raise PushError(
                f"{t.name}: {argv[0]} {why}: {item.source} was NOT installed at {item.dest}, "
                f"nothing was replaced and nothing reloaded. Output of `{' '.join(argv)}`:\n"
                + _output(res.stdout, res.stderr))


def discard(t: Transport, items: list[Item]) -> None:
    """Remove staged copies (best effort: the push has already failed)."""
    if items:
        t.run(["rm", "-f", "--", *(i.staged for i in items)])


def commit(t: Transport, plan: TargetPlan, changed: list[tuple[Item, FileStatus]],
           result: PushResult, gone: list[Stale] | None = None) -> None:
    """Keep one backup, rename into place, remove upi's stale files, relabel, reload if a config changed.

    If a backup or a rename fails, the files this target already replaced are
    put back (from their kept copies) and the rest of its staged copies
    removed: the host is left as it was, the stale files included.
    """
    _replace_all(t, changed)
    if gone:
        argv = ["rm", "-f", "--", *(s.dest for s in gone)]
        result.steps.append(Step(plan.name, t.name, REMOVE, argv, _check(t, argv, "removing stale files")))
    dests = [item.dest for item, _ in changed]
    if dests and t.run(["selinuxenabled"]).returncode == 0:
        argv = ["restorecon", "--", *dests]
        result.steps.append(Step(plan.name, t.name, "SELinux labels", argv, _check(t, argv, "restorecon")))
    if any(item.kind in VALIDATED for item, _ in changed) or any(s.kind in VALIDATED for s in gone or []):
        res = t.run(plan.reload)
        result.steps.append(Step(plan.name, t.name, "reload", plan.reload, res.returncode))
        if res.returncode != 0:
            raise PushError(f"{t.name}: the new files are in place but `{' '.join(plan.reload)}` "
                            f"failed (exit {res.returncode}):\n" + _output(res.stdout, res.stderr))


def _replace_all(t: Transport, changed: list[tuple[Item, FileStatus]]) -> None:
    done: list[tuple[Item, bool]] = []  # (item, whether the old file was kept)
    try:
        for item, status in changed:
            kept = status.status == "changed"
            if kept:
                # -P: link the file itself; -T: never into a directory planted at the name.
                _check(t, ["ln", "-fPT", "--", item.dest, item.keep], f"keeping {item.dest}")
            try:
                _check(t, ["mv", "-fT", "--", item.staged, item.dest], f"installing {item.dest}")
            except UpiError:
                if kept:  # the old file is still in place: its kept copy goes
                    with contextlib.suppress(UpiError, OSError):
                        t.run(["rm", "-f", "--", item.keep])
                raise
            done.append((item, kept))
    except UpiError as exc:
        _put_back(t, done)
        discard(t, [item for item, _ in changed][len(done):])
        raise PushError(f"{exc} The {len(done)} file(s) already replaced on {t.name} were put back; "
                        "nothing reloaded.") from None
    transient = [item.keep for item, kept in done if kept and item.backup is None]
    if transient:
        t.run(["rm", "-f", "--", *transient])


def _put_back(t: Transport, done: list[tuple[Item, bool]]) -> None:
    """Undo renames (best effort: the push has already failed)."""
    for item, kept in reversed(done):
        with contextlib.suppress(UpiError, OSError):
            if kept:
                t.run(["mv", "-fT", "--", item.keep, item.dest])
            else:
                t.run(["rm", "-f", "--", item.dest])


def planned_steps(plan: TargetPlan, host: str, changed: list[tuple[Item, FileStatus]],
                  gone: list[Stale] | None = None) -> list[Step]:
    """The commands a real run would add (for --dry-run)."""
    steps = [Step(plan.name, host, f"validate {i.source}", argv)
             for i, _ in changed if (argv := validation(i))]
    if gone:
        steps.append(Step(plan.name, host, REMOVE, ["rm", "-f", "--", *(s.dest for s in gone)]))
    if changed:
        steps.append(Step(plan.name, host, "SELinux labels (if enabled)",
                          ["restorecon", "--", *(i.dest for i, _ in changed)]))
    if any(i.kind in VALIDATED for i, _ in changed) or any(s.kind in VALIDATED for s in gone or []):
        steps.append(Step(plan.name, host, "reload", plan.reload))
    return steps


def verify_images(plans: list[TargetPlan]) -> None:
    """Hash each image `upi images` recorded before any host is touched; a changed one is refused.

    Item.sha256 raises for a file whose content no longer matches its record;
    the digest is kept, so the upload is checked against the record too.
    """
    for plan in plans:
        for item in plan.items:
            if item.local is not None and item.local.recorded is not None:
                _ = item.sha256


def apply(plans: list[TargetPlan], connect: Connect, *, dry_run: bool = False) -> PushResult:
    """Push every plan; with `dry_run`, only compare and report what would run.

    Each plan's ledgers (upi.push.owned) are read with the comparison; a
    plan with `prune` roots removes the files recorded there that it no
    longer has, once its new files are in place.
    """
    verify_images(plans)
    result = PushResult(dry_run)
    opened: list[tuple[TargetPlan, Transport, list[tuple[Item, FileStatus]]]] = []
    books: list[tuple[list[Ledger], list[Stale]]] = []
    try:
        for plan in plans:
            t = connect(plan)
            opened.append((plan, t, []))
            found = compare(t, plan)
            result.files += [s for _, s in found]
            opened[-1][2].extend(pair for pair in found if pair[1].status != "unchanged")
            ledgers = read_ledgers(t, plan.domain, sorted(set(roots_of(plan.items)) | set(plan.prune))
                                   ) if plan.domain else []
            stale = stale_files(t, plan, ledgers)
            books.append((ledgers, stale))
            result.files += [s.status(plan.name, t.name) for s in stale if s.action != "gone"]
        if dry_run:
            for (plan, t, changed), (_, stale) in zip(opened, books, strict=True):
                result.steps += planned_steps(plan, t.name, changed, removable(stale))
            return result
        _stage_and_validate(opened, result)
        for (plan, t, changed), (ledgers, stale) in zip(opened, books, strict=True):
            if changed or removable(stale):
                commit(t, plan, changed, result, removable(stale))
            record(t, plan, ledgers, stale, result)
        return result
    finally:
        for _, t, _ in opened:
            t.close()


def _stage_and_validate(opened: list[tuple[TargetPlan, Transport, list[tuple[Item, FileStatus]]]],
                        result: PushResult) -> None:
    staged: list[tuple[Transport, list[Item]]] = []
    try:
        for plan, t, changed in opened:
            items = [i for i, _ in changed]
            if items:
                staged.append((t, items))
                stage(t, items)
                validate(t, plan, items, result)
    except BaseException:
        for t, items in staged:
            with contextlib.suppress(UpiError, OSError):  # keep the first error, not the cleanup's
                discard(t, items)
        raise


def stale_files(t: Transport, plan: TargetPlan, ledgers: list[Ledger]) -> list[Stale]:
    """The files recorded in the plan's prune roots that it no longer places, each with what to do."""
    dests = {item.dest for item in plan.items}
    prune = set(plan.prune)
    candidates = [(lg, rel) for lg in ledgers if lg.root in prune
                  for rel in sorted(lg.found) if lg.dest(rel) not in dests]
    # Every directory between a root and a candidate must be a real one: `rm` would follow a link there.
    between = {d for lg, rel in candidates for d in _ancestors(posixpath.dirname(lg.dest(rel)))
               if len(d) > len(lg.root.rstrip("/"))}
    dirs = _stat(t, sorted(between))
    linked = {d for d, raw in dirs.items() if not stat.S_ISDIR(raw)}
    modes = _stat(t, [lg.dest(rel) for lg, rel in candidates])
    digests = _digests(t, [p for p, raw in modes.items() if stat.S_ISREG(raw)])
    return find_stale(candidates, modes, digests, linked)


def record(t: Transport, plan: TargetPlan, ledgers: list[Ledger], stale: list[Stale],
           result: PushResult) -> None:
    """Write each ledger whose entries this push changed (the files placed, minus those gone)."""
    by_root = roots_of(plan.items)
    for lg in ledgers:
        prune = {s.rel for s in stale if s.ledger is lg and s.action != "keep"}
        entries = updated(lg, by_root.get(lg.root, []), prune=prune)
        if entries != lg.found:
            argv = write(t, lg, dump(plan.domain, entries))
            result.steps.append(Step(plan.name, t.name, "record the files upi placed", argv, 0))
