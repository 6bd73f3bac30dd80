"""Where the knowledge base is and who the learner is, the same for the CLI and the TUI:
`--kb`/`--learner`, else POSTMORTEM_KB / POSTMORTEM_LEARNER, else the config file
($XDG_CONFIG_HOME/postmortem/config.toml, written by `postmortem init`), else the git
repository you stand in and no learner."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import tomllib

from postmortem.errors import KBError, UserError
from postmortem.files import NameRefused, atomic_write, check_name

KB_VAR, LEARNER_VAR = "POSTMORTEM_KB", "POSTMORTEM_LEARNER"
HERE = "the folder you stand in"


@dataclass(frozen=True)
class Settings:
    kb: Path                    # the knowledge base's folder (its repository's root once it has one)
    learner: str | None         # None: nobody named yet (asked for, never the OS user)
    kb_from: str                # where kb came from: --kb, POSTMORTEM_KB, the config file, or HERE
    learner_from: str | None

    @property
    def chosen(self) -> bool:
        """True when the knowledge base was named (flag, variable or config), not defaulted."""
        return self.kb_from != HERE


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "postmortem" / "config.toml"


def state_folder() -> Path:
    """Drafts and replay evidence when no knowledge base is named ($XDG_STATE_HOME)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "postmortem"


def read_config(path: Path | None = None) -> dict:
    """The config file's `kb` and `learner` ({} when there is none); a broken one is one line."""
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read it: {getattr(err, 'strerror', None) or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: not TOML: {err} (fix it, or `postmortem init` writes it again)") from None
    for key in ("kb", "learner"):
        if key in data and not isinstance(data[key], str):
            raise UserError(f"{path}: `{key}` is not text")
    return {k: data[k] for k in ("kb", "learner") if data.get(k)}


def _learner(name: str, where: str) -> str:
    try:
        return check_name(name, "learner name")
    except NameRefused as err:
        raise KBError(f"{err} ({where})") from None


def resolve(kb: str | Path | None = None, learner: str | None = None) -> Settings:
    """The settings in force: each from the first of the flag, the variable, the config file."""
    config, where = read_config(), f"the config file {config_path()}"
    if kb:
        kb_path, kb_from = Path(kb), "--kb"
    elif os.environ.get(KB_VAR):
        kb_path, kb_from = Path(os.environ[KB_VAR]), KB_VAR
    elif config.get("kb"):
        kb_path, kb_from = Path(config["kb"]), where
    else:
        kb_path, kb_from = Path.cwd(), HERE
    kb_path = Path(os.path.abspath(os.path.expanduser(kb_path)))
    for value, source in ((learner, "--learner"), (os.environ.get(LEARNER_VAR), LEARNER_VAR),
                          (config.get("learner"), where)):
        if value:
            return Settings(kb_path, _learner(value, source), kb_from, source)
    return Settings(kb_path, None, kb_from, None)


def remember(kb: str | Path | None = None, learner: str | None = None) -> Path:
    """Write `kb` and/or `learner` into the config file, keeping what it held; its path."""
    path = config_path()
    data = read_config(path)
    if kb is not None:
        data["kb"] = os.path.abspath(os.path.expanduser(kb))
    if learner is not None:
        data["learner"] = _learner(learner, "--learner")
    # two string keys: a JSON string is a TOML basic string
    text = "# postmortem: where the knowledge base is and who you are (postmortem init)\n" + "".join(
        f"{key} = {json.dumps(data[key], ensure_ascii=False)}\n" for key in ("kb", "learner") if key in data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    return path


def own_checkout() -> Path | None:
    """The root of postmortem's own git checkout when it runs from one (None when installed)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / ".git").exists() and (root / "postmortem" / "kb" / "settings.py").is_file() else None


def is_own_checkout(folder: Path) -> bool:
    """True when `folder` is inside postmortem's own checkout: post-mortems do not go there
    unless asked for by name (--kb)."""
    own = own_checkout()
    if own is None:
        return False
    here = Path(os.path.abspath(folder)).resolve()
    return here == own or here.is_relative_to(own)


def drafts_home(settings: Settings) -> Path:
    """The folder whose `.postmortem/` holds the drafts and the replay evidence, keyed by run:
    the knowledge base when one is named, else the user's state folder; either way the same
    from any working directory."""
    return settings.kb if settings.chosen else state_folder()
