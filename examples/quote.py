"""Writes each example's README from its docstring and a real run's report:
`quote.py out/before/report.md out/after/report.json`. The quotes are what mongotap
said about the bad version (heading, link, recommendation, fix); the last line says
what it said about the fixed one. Rerun after changing an example or a detector."""
import ast
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def findings(markdown):
    """(heading, block) of each finding in a Markdown report."""
    parts = re.split(r"^### ", markdown.split("## Findings", 1)[1].split("\n## ", 1)[0], flags=re.M)[1:]
    return [("### " + p).strip() for p in parts]


def quoted(block):
    """The heading, the link line, the recommendation and the fix: the evidence table stays in the report."""
    lines = block.splitlines()
    keep, skip = [], False
    for line in lines:
        if line.startswith("| ") or line.startswith("|---"):
            continue
        if line.startswith("<details>"):
            skip = True
        if skip:
            skip = not line.startswith("</details>")
            continue
        keep.append(line)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()
    return "\n".join("> " + l if l else ">" for l in text.splitlines())


def main():
    before = Path(sys.argv[1]).read_text()
    after = json.load(open(sys.argv[2]))
    from summary import EXAMPLES
    for name in EXAMPLES:
        app = HERE / name / "app.py"
        doc = ast.get_docstring(ast.parse(app.read_text()))
        title, _, body = doc.partition("\n\n")
        mine = [b for b in findings(before) if re.search(rf"on `{name}\.", b.splitlines()[0])]
        left = [f["kind"] for f in after["findings"] if f["namespace"].startswith(name + ".")]
        text = [f"# {name}: {title.rstrip('.')}", "", "```", body.strip(), "```", "",
                "Run it through mongotap (`./scripts/setup.sh` makes `.venv`), with an upstream on 27017:", "", "```sh",
                "mongotap proxy --listen 127.0.0.1:27018 --upstream 127.0.0.1:27017 --report-md report.md &",
                f".venv/bin/python examples/{name}/app.py 'mongodb://127.0.0.1:27018/?directConnection=true' {name} bad",
                f".venv/bin/python examples/{name}/app.py 'mongodb://127.0.0.1:27018/?directConnection=true' {name} fixed",
                "```", "", "## What mongotap says about the bad version", "",
                "Quoted from `out/before/report.md` of a `./scripts/demo.sh` run (the evidence tables are left out):", ""]
        for b in mine:
            text += [quoted(b), ""]
        said = "nothing: no finding on" if not left else f"still {', '.join(left)} on"
        text += ["## And about the fixed version", "", f"In `out/after/report.json`, {said} `{name}.*`.", ""]
        text += ["Both versions run in `tests/scenarios` (`example_" + name + "_bad`, `example_" + name + "_fixed`), "
                 "which assert these findings for the bad version and none at all for the fixed one.", ""]
        (HERE / name / "README.md").write_text("\n".join(text))
        print(f"{name}: {len(mine)} findings quoted, {len(left)} left after the fix")


if __name__ == "__main__":
    main()
