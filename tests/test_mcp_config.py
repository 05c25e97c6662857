"""MCP config files: the hosts' formats, variable expansion, and errors that name file, server and
field but never a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from discovery._mcp.config import ConfigError, HttpServer, StdioServer, load_config, parse_config
from discovery._mcp.jsonc import to_json
from discovery._mcp.serve import UnsafeBind, check_bind
from discovery.cli._main import main

SECRET = "s3cr3t-value-never-shown"


def parsed(document: Any, environ: dict[str, str] | None = None) -> dict[str, Any]:
    return parse_config(document, where="mcp.json", environ=environ or {}).servers


def test_claude_code_config_with_stdio_and_http_servers() -> None:
    servers = parsed(
        {
            "mcpServers": {
                "github": {
                    "type": "stdio",
                    "command": "${HOME}/bin/github-mcp",
                    "args": ["--repo", "${REPO:-tool-index}"],
                    "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
                    "cwd": "/srv",
                },
                "docs": {
                    "type": "http",
                    "url": "${DOCS_URL:-http://127.0.0.1:9000/mcp}",
                    "headers": {"X-Key": "k-${KEY}"},
                },
            }
        },
        {"HOME": "/home/ada", "GITHUB_TOKEN": SECRET, "KEY": "42"},
    )
    assert servers["github"] == StdioServer(
        name="github",
        command="/home/ada/bin/github-mcp",
        args=("--repo", "tool-index"),
        env={"GITHUB_TOKEN": SECRET},
        cwd="/srv",
    )
    assert servers["docs"] == HttpServer(
        name="docs", url="http://127.0.0.1:9000/mcp", headers={"X-Key": "k-42"}
    )
    assert SECRET not in repr(servers["github"]) and "k-42" not in repr(servers["docs"])


def test_claude_desktop_and_cursor_entries_without_type() -> None:
    servers = parsed(
        {
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "fs"]},
                "remote": {"url": "https://x.test/mcp"},
            }
        }
    )
    assert isinstance(servers["fs"], StdioServer) and servers["fs"].args == ("-y", "fs")
    assert isinstance(servers["remote"], HttpServer)


def test_vs_code_servers_key() -> None:
    servers = parsed({"servers": {"fs": {"type": "stdio", "command": "fs-mcp"}}, "inputs": []})
    assert list(servers) == ["fs"]


def test_a_default_applies_when_the_variable_is_empty_or_unset() -> None:
    document = {"mcpServers": {"a": {"command": "${CMD:-run}"}}}
    assert parsed(document, {"CMD": ""})["a"].command == "run"
    assert parsed(document)["a"].command == "run"
    assert parsed(document, {"CMD": "go"})["a"].command == "go"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], 'mcp.json: expected a JSON object with "mcpServers" (or VS Code\'s "servers")'),
        ({"other": {}}, 'mcp.json: no "mcpServers" object (nor VS Code\'s "servers")'),
        ({"mcpServers": []}, "mcp.json: mcpServers: expected an object of servers by name"),
    ],
)
def test_bad_configs(document: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parsed(document)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("npx", "expected an object"),
        ({"args": ["x"]}, "a stdio server needs a command"),
        ({"type": "http"}, "an HTTP server needs a url"),
        ({"type": "ws", "url": "x"}, "unknown type \"ws\": use 'stdio' or 'http'"),
        (
            {"type": "sse", "url": "http://127.0.0.1/sse"},
            "type 'sse' is not supported: use a streamable HTTP endpoint (type 'http')",
        ),
        ({"command": ""}, "command: String should have at least 1 character"),
        ({"command": "x", "argz": []}, "argz: unknown field"),
        ({"command": "x", "args": "--flag"}, "args: Input should be a valid list"),
        ({"url": "ftp://host/mcp"}, "url must start with http:// or https://"),
        (
            {"command": "${NOPE}"},
            "command: environment variable NOPE is not set (write ${NOPE:-default} for a default)",
        ),
        ({"command": 1}, "command: Input should be a valid string"),
        (
            {"command": "x", "args": ["${command:pickFile}"]},
            "it uses VS Code's ${command:pickFile}, an editor command tool-index cannot run; "
            "put the value in an environment variable and write ${VAR} instead",
        ),
    ],
)
def test_a_bad_entry_is_skipped_with_a_warning_and_the_others_are_served(entry: Any, why: str) -> None:
    config = parse_config({"servers": {"bad": entry, "good": {"command": "x"}}}, where="mcp.json", environ={})
    assert list(config.servers) == ["good"]
    assert config.warnings() == [f"mcp.json: server 'bad' is skipped: {why}"]
    with pytest.raises(ConfigError, match=r"^mcp\.json: server 'bad' cannot be started: "):
        config.select(["bad"])


def test_a_bad_server_name_is_skipped_too() -> None:
    config = parse_config({"mcpServers": {"bad name": {"command": "x"}}}, where="mcp.json", environ={})
    assert config.servers == {}
    assert config.warnings() == [
        "mcp.json: server 'bad name' is skipped: a server name is letters, digits, '_', '-' and '.', "
        "starting with a letter or digit"
    ]


def test_vs_code_and_cursor_variables(tmp_path: Path) -> None:
    """As the editors expand them: the workspace is the folder that holds .vscode/ (or .cursor/)."""
    workspace = tmp_path / "project"
    (workspace / ".vscode").mkdir(parents=True)
    path = workspace / ".vscode" / "mcp.json"
    entry = {
        "command": "${userHome}${/}bin${pathSeparator}fs-mcp",
        "args": ["${workspaceFolder}", "${workspaceFolderBasename}", "${env:TOKEN}", "${env:UNSET}"],
        "env": {"HOME_TOO": "${HOME}"},
    }
    path.write_text(json.dumps({"servers": {"fs": entry}}), encoding="utf-8")
    config = load_config(path, environ={"TOKEN": SECRET, "HOME": "/home/me"})
    server = config.servers["fs"]
    assert isinstance(server, StdioServer)
    assert server.command == str(Path.home() / "bin" / "fs-mcp")
    assert server.args == (str(workspace), "project", SECRET, "")
    assert server.env == {"HOME_TOO": "/home/me"}
    elsewhere = tmp_path / "profile" / "mcp.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps({"servers": {"fs": {"command": "x", "cwd": "${workspaceFolder}"}}}))
    expected = StdioServer("fs", "x", cwd=str(elsewhere.parent))
    assert load_config(elsewhere, environ={}).servers["fs"] == expected


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "x", "env": {"TOKEN": 12345678}},
        {"url": "http://127.0.0.1/mcp", "headers": {"Authorization": ["Bearer", SECRET]}},
        {"command": "x", "env": {"TOKEN": SECRET}, "unknown": SECRET},
    ],
)
def test_errors_never_quote_a_secret(entry: dict[str, Any]) -> None:
    warnings = parse_config({"mcpServers": {"a": entry}}, where="mcp.json", environ={}).warnings()
    assert len(warnings) == 1 and SECRET not in warnings[0] and "12345678" not in warnings[0]


def test_files_that_are_not_configs(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match=r"missing\.json: cannot read: No such file or directory"):
        load_config(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {\n  "a": }', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.json:2: invalid JSON: Expecting value \(column 8\)"):
        load_config(broken)


def test_a_relative_cwd_is_taken_from_the_config_files_directory(tmp_path: Path) -> None:
    entries = {"rel": {"command": "x", "cwd": "${SUB:-work}/srv"}, "abs": {"command": "x", "cwd": "/srv"}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    loaded = load_config(tmp_path / "mcp.json", environ={}).servers
    assert [server.cwd for server in loaded.values() if isinstance(server, StdioServer)] == [
        str(tmp_path / "work" / "srv"),
        "/srv",
    ]
    assert parsed({"mcpServers": entries})["rel"] == StdioServer(name="rel", command="x", cwd="work/srv")


def test_the_command_line_reports_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": []}), encoding="utf-8")
    for command in (["sync"], ["serve"]):
        result = CliRunner().invoke(
            main, ["--db", f"sqlite:///{tmp_path / 't.db'}", *command, "--config", str(config)]
        )
        assert (result.exit_code, result.stderr) == (
            1,
            f"Error: {config}: mcpServers: expected an object of servers by name\n",
        )


def test_sync_warns_of_a_bad_entry_and_syncs_the_others(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"gh": {"type": "stdio", "args": []}}}), encoding="utf-8")
    result = CliRunner().invoke(
        main, ["--db", f"sqlite:///{tmp_path / 't.db'}", "sync", "--config", str(config)]
    )
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == f"Warning: {config}: server 'gh' is skipped: a stdio server needs a command\n"


def test_sync_names_an_unknown_server(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"gh": {"command": "x"}}}), encoding="utf-8")
    result = CliRunner().invoke(
        main, ["--db", f"sqlite:///{tmp_path / 't.db'}", "sync", "--config", str(config), "--server", "slack"]
    )
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {config}: no server named 'slack' (configured: gh)\n",
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "gateway.example"])
def test_http_beyond_loopback_needs_a_token(tmp_path: Path, host: str) -> None:
    """Refused before anything is bound or contacted."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    args = [
        "--db",
        f"sqlite:///{tmp_path / 't.db'}",
        "serve",
        "--config",
        str(config),
        "--transport",
        "http",
        "--host",
        host,
    ]
    result = CliRunner().invoke(main, args, env={"TOOL_INDEX_TOKEN": None})
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: --host {host} is not 127.0.0.1, localhost or ::1, the hosts served without a token: "
        "give --token SECRET (clients send 'Authorization: Bearer SECRET'), or bind 127.0.0.1\n"
    )
    assert not (tmp_path / "t.db").exists()


def test_only_the_protected_loopback_names_go_without_a_token() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, None)
    for host in ("127.0.0.2", "127.1", "::ffff:127.0.0.1", "LOCALHOST.", "0.0.0.0"):
        with pytest.raises(UnsafeBind):
            check_bind(host, None)
        check_bind(host, "token")


def test_catalog_names_split_into_server_and_tool() -> None:
    from discovery._mcp.names import catalog_name, split_catalog_name

    servers = ["git", "git__hub", "slack"]
    assert split_catalog_name(catalog_name("git__hub", "create_issue"), servers) == (
        "git__hub",
        "create_issue",
    )
    assert split_catalog_name("mcp__git__log", servers) == ("git", "log")
    assert split_catalog_name("mcp__slack__post__message", servers) == ("slack", "post__message")
    assert split_catalog_name("mcp__other__x", servers) is None
    assert split_catalog_name("mcp__slack__", servers) is None
    assert split_catalog_name("read", servers) is None


# JSON with comments and trailing commas (VS Code, Cursor)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
COMMENTS = st.text(alphabet=st.sampled_from(list('ab "/*,]}\\\n')), max_size=12)


@given(JSON_VALUES, st.sampled_from([None, 0, 2]), st.booleans())
def test_jsonc_leaves_plain_json_exactly_as_it_is(value: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert to_json(text) == text


@given(st.data(), JSON_VALUES)
def test_jsonc_comments_and_trailing_commas_read_as_json(data: st.DataObject, value: Any) -> None:
    def comment() -> str:
        kind = data.draw(st.sampled_from(["", "line", "block"]))
        body = data.draw(COMMENTS)
        if kind == "line":
            return " //" + body.replace("\n", " ") + "\n"
        if kind == "block":
            return "/*" + body.replace("*/", "* /").rstrip("*") + "*/"
        return data.draw(st.sampled_from(["", " ", "\n\t"]))

    def render(item: Any) -> str:
        if isinstance(item, list):
            parts = [comment() + render(part) + comment() for part in item]
            trailing = "," + comment() if data.draw(st.booleans()) and parts else ""
            return "[" + comment() + ",".join(parts) + trailing + "]"
        if isinstance(item, dict):
            parts = [
                comment() + json.dumps(key) + comment() + ":" + comment() + render(part) + comment()
                for key, part in item.items()
            ]
            trailing = "," + comment() if data.draw(st.booleans()) and parts else ""
            return "{" + comment() + ",".join(parts) + trailing + "}"
        return json.dumps(item)

    text = comment() + render(value) + comment()
    assert json.loads(to_json(text)) == value
    assert len(to_json(text)) == len(text)  # every position kept: json's errors point into the file


@pytest.mark.parametrize("text", ["[,]", "{,}", "[1,,]", '{"a":,}', "[1,]x", "// only a comment"])
def test_jsonc_keeps_what_json_would_reject(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(to_json(text))


def test_a_vs_code_config_with_comments_and_inputs(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        """{
  // Servers of this workspace
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true},
  ],
  "servers": {
    /* a stdio server; its url-looking argument is a string, not a comment */
    "fs": {"type": "stdio", "command": "fs-mcp", "args": ["http://x.test/a//b", "/*glob*/",],},
    "github": {
      "command": "gh-mcp",
      "env": {"GITHUB_TOKEN": "${input:gh-token}", "OTHER": "${input:org}"},
    },
  },
}
""",
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    assert list(config.servers) == ["fs"]
    assert config.servers["fs"].args == ("http://x.test/a//b", "/*glob*/")  # type: ignore[union-attr]
    assert config.warnings() == [
        f"{path}: server 'github' is skipped: it uses VS Code's ${{input:gh-token}}, ${{input:org}}, "
        "which tool-index cannot prompt for; put the value in an environment variable and write "
        "${VAR} instead"
    ]
    with pytest.raises(ConfigError, match=r"server 'github' cannot be started: it uses VS Code's"):
        config.select(["github"])
    assert [server.name for server in config.select([])] == ["fs"]


def test_errors_in_a_file_with_comments_point_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    text = '{"mcpServers": { /* one\n two */ "a": {"command": "x"} // ok\n  "b": }'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"mcp\.json:3: invalid JSON: Expecting ',' delimiter \(column 3\)"):
        load_config(path)
    path.write_text('{"mcpServers": {}}\n\n/* never closed', encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"mcp\.json:3: invalid JSON: a /\* comment that never ends \(it starts on line 3\)"
    ):
        load_config(path)
