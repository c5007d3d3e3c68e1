"""results.json and the markdown of summary.md, for vmm-bench and vmm-ci."""
import json
import re

# XML 1.0's Char production (section 2.2): anything else makes the document
# unparseable (U+FFFE from a guest's console once did).
XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def xml_text(text):
    """text with the characters XML 1.0 does not allow dropped."""
    return XML_INVALID.sub("", text)


def md_text(text):
    """Text from a guest (a check's name or detail) as inert markdown: HTML
    escaped, markdown's emphasis, link, code and table characters escaped,
    one line (a KUnit case named 'a | b | <img ...>' added columns and raw
    HTML to summary.md)."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return MD_SPECIAL.sub(r"\\\1", " ".join(text.splitlines()))


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
