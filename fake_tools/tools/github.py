"""GitHub tools: one account, its repositories, files per branch and issues, in ``state/github.json``.

``repos`` maps "owner/name" to {"private", "description", "default_branch",
"branches": {branch: {path: content}}, "issues": [...]}. Writing a file is a put
on one branch; creating an issue numbers it as GitHub does and stores the call
id as ``ref``, so a probe finds this call's issue the way an agent would search
the issue list.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from killpoint.fake_tools.base import ToolFailed
from killpoint.fake_tools.schema import NAME, PATH, TEXT, obj
from killpoint.fake_tools.tools._areas import (
    SHORT,
    Args,
    State,
    enum,
    logged_tool,
    matches,
    pick,
    reader,
    setter,
)

DEFAULT_GITHUB: State = {"user": {"login": "agent", "name": "Agent"}, "repos": {}}
REPO = {"type": "string", "minLength": 3, "maxLength": 100}


def _repo(state: State, args: Args) -> dict[str, Any]:
    return pick(state["repos"], args["repo"], "repository")


def _branch(state: State, args: Args) -> dict[str, str]:
    repo = _repo(state, args)
    name = args.get("branch", repo.get("default_branch", "main"))
    return pick(repo.setdefault("branches", {}), name, f"branch of {args['repo']}")


def _repo_path(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ToolFailed(f"repository path {path!r} refused: it must be relative, without '..'")
    return pure.as_posix()


@reader("github_get_user", family="github", area="github", default=DEFAULT_GITHUB)
def github_get_user(state: State, args: Args) -> dict[str, Any]:
    return state["user"]


@reader("github_list_repos", family="github", area="github", default=DEFAULT_GITHUB)
def github_list_repos(state: State, args: Args) -> list[dict[str, Any]]:
    return [{"repo": name, "private": bool(repo.get("private")), "description": repo.get("description", "")}
            for name, repo in sorted(state["repos"].items())]


@reader("github_list_issues", family="github", area="github", default=DEFAULT_GITHUB,
        schema=obj({"repo": REPO}, {"state": enum("open", "closed", "all")}))
def github_list_issues(state: State, args: Args) -> list[dict[str, Any]]:
    wanted = args.get("state", "open")
    return [{"number": issue["number"], "title": issue["title"], "state": issue.get("state", "open")}
            for issue in _repo(state, args).get("issues", [])
            if wanted == "all" or issue.get("state", "open") == wanted]


@reader("github_read_file", family="github", area="github", default=DEFAULT_GITHUB,
        schema=obj({"repo": REPO, "path": PATH}, {"branch": NAME}))
def github_read_file(state: State, args: Args) -> str:
    return pick(_branch(state, args), _repo_path(args["path"]), "file on that branch")


@reader("github_search_code", family="github", area="github", default=DEFAULT_GITHUB,
        schema=obj({"query": SHORT}, {"repo": REPO}))
def github_search_code(state: State, args: Args) -> list[dict[str, Any]]:
    """Files on each repository's default branch whose text matches every word of the query."""
    names = [args["repo"]] if "repo" in args else sorted(state["repos"])
    return [{"repo": name, "path": path}
            for name in names
            for path, content in sorted(_branch(state, {"repo": name}).items())
            if matches(args["query"], content)]


@setter("github_write_file", family="github", area="github", default=DEFAULT_GITHUB, effect="github_file_written",
        schema=obj({"repo": REPO, "path": PATH, "content": TEXT}, {"branch": NAME, "message": SHORT}))
def github_write_file(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    """Create or overwrite a file on a branch (the default branch unless told)."""
    return _branch(state, args), _repo_path(args["path"]), args["content"]


def _issues(state: State, args: Args) -> list[dict[str, Any]]:
    return _repo(state, args).setdefault("issues", [])


@logged_tool("github_create_issue", family="github", area="github", default=DEFAULT_GITHUB, entries=_issues,
             effect="issue_created", schema=obj({"repo": REPO, "title": SHORT}, {"body": TEXT}))
def github_create_issue(state: State, args: Args) -> tuple[dict[str, Any], dict[str, Any]]:
    number = 1 + max((issue.get("number", 0) for issue in _issues(state, args)), default=0)
    issue = {"number": number, "title": args["title"], "body": args.get("body", ""), "state": "open"}
    return issue, {"number": number, "url": f"https://github.example/{args['repo']}/issues/{number}"}
