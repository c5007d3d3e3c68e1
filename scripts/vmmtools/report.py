"""results.json and the markdown of summary.md, for vmm-bench and vmm-ci."""
import json


def write_json(path, doc, sort_keys=False):
    """results.json: one-space indent, UTF-8 as is, a final newline."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False, sort_keys=sort_keys)
        f.write("\n")


def row(cells):
    """One markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header, align, rows):
    """A markdown table: header cells, align (one letter a column: l or r),
    then the rows (lists of cells); as a list of lines."""
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return [row(header), rule] + [row(r) for r in rows]
