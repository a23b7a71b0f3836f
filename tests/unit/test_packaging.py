"""The repository's shape: pins in step, thin function images, one function table."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from deploy.functions import FUNCTIONS
from local.ports import PORTS

REPO = Path(__file__).resolve().parents[2]


def test_runtime_pins_match_the_image_lock() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    lock = dict(
        re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", (REPO / "requirements/image.txt").read_text(), re.M)
    )
    for dep in deps:
        name, version = dep.split("==")
        assert lock.get(name) == version, f"{dep} differs from requirements/image.txt"
    assert all(
        "--hash=sha256:" in block for block in (REPO / "requirements/image.txt").read_text().split("==")[1:]
    )


def test_each_function_has_a_thin_image_and_a_screenful_handler() -> None:
    assert sorted(p.name for p in (REPO / "images").iterdir() if p.is_dir()) == sorted(
        f.name for f in FUNCTIONS
    )
    for fn in FUNCTIONS:
        dockerfile = (REPO / "images" / fn.name / "Dockerfile").read_text().strip().splitlines()
        assert len(dockerfile) <= 10 and dockerfile[-1] == 'CMD ["app.handler"]'
        app = (REPO / "images" / fn.name / "app.py").read_text()
        assert len(app.splitlines()) <= 40 and f'make_handler("{fn.name}"' in app


def test_local_ports_are_9001_to_9006_in_contract_order() -> None:
    assert [PORTS[f.name] for f in FUNCTIONS] == list(range(9001, 9007))
    assert [f.name for f in FUNCTIONS] == [
        "inbound-handler",
        "reply-handler",
        "attachment-extractor",
        "ack-sender",
        "forward-sender",
        "reply-sender",
    ]


def _imports(path: Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_the_handlers_never_import_host_tooling() -> None:
    """The handlers (images/*/app.py) never import the CLI, the local tooling, the operator commands or
    the deploy: they are not in the image. For common/, test_architecture's import graph holds the
    same rule (test_common_imports_no_host_code)."""
    shipped = list((REPO / "images").glob("*/app.py"))
    host = ("deploy", "cli", "local", "ops")
    offenders = {
        str(p.relative_to(REPO)): sorted(m for m in _imports(p) if m.split(".")[0] in host) for p in shipped
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_functions_that_use_the_owners_key_load_it_at_cold_start() -> None:
    """Function.owner_key (which also grants the SSM read, deploy/iam.py) and the image's wiring agree:
    exactly those functions pass common.mail.encrypt.with_owner_key to make_handler,
    so a key that cannot encrypt stops their start and no other function reads it."""
    for fn in FUNCTIONS:
        imported = _imports(REPO / "images" / fn.name / "app.py")
        assert ("common.mail.encrypt.with_owner_key" in imported) == fn.owner_key, fn.name
        # and each mailbox's own key (MAILBOX_KEYS): the same agreement with Function.mailbox_keys
        assert ("common.mail.encrypt.with_mailbox_keys" in imported) == fn.mailbox_keys, fn.name


def test_the_import_check_names_a_host_import(tmp_path: Path) -> None:
    """The build-time check flags an import the image cannot satisfy and passes the standard library.
    Run without site-packages (-S, -I) as the image would lack the host packages."""
    (tmp_path / "common" / "mail").mkdir(parents=True)
    (tmp_path / "common" / "mail" / "ok.py").write_text("import json\nfrom common.mail import ok\n")
    (tmp_path / "common" / "mail" / "bad.py").write_text("def f():\n    from local import env\n")
    run = subprocess.run(
        [sys.executable, "-I", "-S", str(REPO / "docker" / "check-imports.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert run.returncode == 1
    assert run.stderr.splitlines() == ["common/mail/bad.py: imports local, which the image does not have"]
