"""`postmortem init`: where the knowledge base is and who the learner is, kept in the config
file once so that every command and the dashboard find them from any folder."""

from __future__ import annotations

import sys
from pathlib import Path

from postmortem.cli.options import add_json, command, print_json
from postmortem.errors import KBError


def cmd_init(args) -> int:
    from postmortem.kb import settings
    from postmortem.kb.commit import kb_root, open_repo
    wrote = None
    if args.kb is not None:
        folder = Path(args.kb).expanduser()
        if settings.is_own_checkout(folder):
            raise KBError(f"{args.kb} is inside postmortem's own checkout: name a folder of its own")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KBError(f"cannot make {args.kb}: {err.strerror or err}") from None
        made = kb_root(folder) == folder.absolute() and not (folder / ".git").exists()
        open_repo(folder, init=True)
        if made:
            print(f"made a git repository in {folder.absolute()}", file=sys.stderr)
        wrote = settings.remember(kb=kb_root(folder))
    if args.learner is not None:
        wrote = settings.remember(learner=args.learner)
    now = settings.resolve()
    if wrote:
        print(f"wrote {wrote}", file=sys.stderr)
    if args.json:
        print_json({"kb": str(kb_root(now.kb)), "kb_from": now.kb_from, "learner": now.learner,
                    "learner_from": now.learner_from, "config": str(settings.config_path())}, allow_nan=True)
        return 0
    print(f"knowledge base: {kb_root(now.kb)}  (from {now.kb_from})")
    print(f"learner: {now.learner or 'nobody yet: postmortem init --learner NAME'}"
          + (f"  (from {now.learner_from})" if now.learner_from else ""))
    if not now.chosen:
        print(_unnamed(now.kb))
    elif now.learner:
        print(f"next: `postmortem new RUN` drafts a post-mortem, `postmortem commit FILE` puts it in "
              f"learners/{now.learner}/ there, from any folder")
    return 0


def _unnamed(folder: Path) -> str:
    """Where a commit would go with no knowledge base named, as `commit` would do it: the
    repository you stand in, but never postmortem's own checkout, and nowhere outside one."""
    from postmortem.kb import settings
    from postmortem.kb.commit import open_repo
    name_one = "`postmortem init --kb DIR` names your knowledge base once, for every folder"
    if settings.is_own_checkout(folder):
        return f"you stand in postmortem's own checkout, where `commit` writes nothing: {name_one}"
    try:
        open_repo(folder)
    except KBError:
        return f"you stand in no git repository, so `commit` has nowhere to write: {name_one}"
    return f"post-mortems go to the git repository you stand in: {name_one}"


def register(sub) -> None:
    p = command(sub, "init", "name the knowledge base and the learner, once for every folder",
                "Name the knowledge-base folder (a git repository, made when it is not one) and who you\n"
                "are, in the config file ($XDG_CONFIG_HOME/postmortem/config.toml). `new`, `commit`,\n"
                "`lessons`, `similar` and the dashboard use them from any folder; --kb/--learner and\n"
                "POSTMORTEM_KB/POSTMORTEM_LEARNER override them. Without options: what is in force.",
                ("postmortem init --kb ~/postmortems --learner ada",
                 "postmortem init                      # where post-mortems go, and as whom"))
    p.add_argument("--kb", metavar="DIR", help="the knowledge base: made (with git init) when it is not there")
    p.add_argument("--learner", metavar="NAME", help="who you are: your post-mortems go to learners/NAME/")
    add_json(p, "the settings in force and where each came from")
    p.set_defaults(func=cmd_init)
