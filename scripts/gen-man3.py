#!/usr/bin/env python3
"""Section-3 man pages of gpuport's public calls, from the doxygen comments
of the public headers (include/gpuport/*.h).

One page per call (every gpuport_* function and function-like macro the
headers document, but the gpuport_dev_* and gpuport_mdev_* functions of
gpuport_device_impl.h, which are the device calls' implementation): NAME (the
comment's first sentence), SYNOPSIS (the #include and the prototype),
LIBRARY, DESCRIPTION (the comment, its @param list, and the text of the
@name group the call is in), RETURN VALUE (@return and @retval), SEE ALSO
(every call the page names, the calls that make the handles it takes, its
counterpart, such as _destroy for _create, and gpuport(7)). A call's other
forms get .so
pages to it and share its page: the _v entry point of an inline function
or macro, the _tagged function behind a macro, a macro of the function's
own name. doxygen's own man output is one page per header, so this reads
the comments itself; it knows the tags the headers use (@param[dir],
@retval, @return, @name with @{ @}, @file) and stops on any other, and on a
call that returns a value without saying what (@return or @retval).

The pages' .TH date and version are gpuport(7)'s (man/gpuport.7), so that
the pages of one release agree. Output is a function of the headers and
that line alone: test/tools/man_pages.sh compares it with the committed
man/man3 and man/man3.am; make man3 (or make update-man) rewrites them.

Usage: gen-man3.py [--srcdir DIR] --out DIR
    writes DIR/man3/*.3 and DIR/man3.am (the automake list of the pages)
"""

import argparse
import os
import re
import sys

HEADERS = ["gpuport.h", "gpuport_device.h", "gpuport_peer.h", "gpuport_mpi.h",
           "gpuport_trigger.h"]
# headers that another includes, and a program includes that one for them
INCLUDED_BY = {"gpuport_peer.h": "gpuport_device.h"}
# what a program links for the exported functions of each header
LIBRARY = {
    "gpuport.h": ("libgpuport", "-lgpuport"),
    "gpuport_device.h": ("libgpuport", "-lgpuport"),
    "gpuport_peer.h": ("libgpuport", "-lgpuport"),
    "gpuport_trigger.h": ("libgpuport", "-lgpuport"),
    "gpuport_mpi.h": ("libgpuport_mpi, over libgpuport", "-lgpuport_mpi -lgpuport"),
}
INTERNAL = re.compile(r"^gpuport_[mp]?dev_")
# the forms that share the page of the call they end in
ALIAS_SUFFIXES = ("_v", "_tagged")
# SEE ALSO: the call that makes each handle a call takes ...
MAKER = {
    "gpuport_comm_t": "gpuport_comm_create",
    "gpuport_mem_t": "gpuport_mem_register",
    "gpuport_channel_t": "gpuport_channel_create",
    "gpuport_memory_channel_t": "gpuport_memory_channel_create",
    "gpuport_peer_channel_t": "gpuport_peer_channel_create",
    "gpuport_port_channel_dev_t": "gpuport_channel_device",
    "gpuport_memory_channel_dev_t": "gpuport_memory_channel_device",
}
# ... and the call that undoes a call, or that it undoes
COUNTERPARTS = [("_create", "_destroy"), ("_register", "_deregister"), ("_alloc", "_free")]
WIDTH = 78


def die(msg):
    sys.stderr.write("gen-man3.py: %s\n" % msg)
    sys.exit(1)


# ---- reading a header ----

def tokens(text):
    """The header as ('doc', body, line) for each /** comment (not /**<)
    and ('code', text) between them, plain comments and /**< comments
    blanked out of the code."""
    out = []
    code = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                die("unterminated comment")
            body = text[i:end + 2]
            if body.startswith("/**") and not body.startswith("/**<") and body != "/**/":
                out.append(("code", "".join(code)))
                code = []
                out.append(("doc", body[3:-2], text.count("\n", 0, i) + 1))
            else:
                code.append(" " + "\n" * body.count("\n"))
            i = end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            code.append(text[i:j + 1])
            i = j + 1
        else:
            code.append(c)
            i += 1
    out.append(("code", "".join(code)))
    return out


def comment_lines(body):
    """The comment's lines without their leading ' * ', each as (indent, text)."""
    lines = []
    for raw in body.split("\n"):
        s = re.sub(r"^\s*\*(?!/)", "", raw) if re.match(r"^\s*\*", raw) else raw
        s = s.rstrip()
        stripped = s.lstrip()
        lines.append((len(s) - len(stripped), stripped))
    while lines and not lines[0][1]:
        lines.pop(0)
    while lines and not lines[-1][1]:
        lines.pop()
    return lines


def first_decl(code):
    """The declaration at the start of a code chunk: a #define line, or the
    text up to the first ; or { outside parentheses. Other preprocessor
    lines before it are passed over."""
    i = 0
    n = len(code)
    while True:
        while i < n and code[i].isspace():
            i += 1
        if i >= n:
            return None
        if code[i] == "#":
            j = i
            while True:
                e = code.find("\n", j)
                if e < 0:
                    e = n
                if e > 0 and code[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            line = code[i:e].replace("\\\n", " ")
            if re.match(r"#\s*define\b", line):
                return " ".join(line.split())
            i = e
            continue
        depth = 0
        j = i
        while j < n:
            if code[j] == "(":
                depth += 1
            elif code[j] == ")":
                depth -= 1
            elif code[j] in ";{" and depth == 0:
                break
            j += 1
        return " ".join(code[i:j].split())


def split_params(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_param(p):
    """'const gpuport_bootstrap_t *bootstrap' -> ('const gpuport_bootstrap_t *', 'bootstrap')"""
    if p == "void":
        return None
    m = re.match(r"^(.*?)(\w+)$", p)
    if not m or not m.group(1).strip():
        die("cannot read parameter '%s'" % p)
    t = m.group(1).rstrip()
    return (t if t.endswith("*") else t + " ", m.group(2))


def parse_decl(decl):
    """A call's declaration as a dict, or None for anything else."""
    m = re.match(r"#\s*define\s+(gpuport_\w+)\(([^)]*)\)", decl)
    if m:
        return {"name": m.group(1), "kind": "macro", "ret": "#define ",
                "params": [("", a.strip()) for a in m.group(2).split(",") if a.strip()]}
    if decl.startswith("#") or decl.startswith("typedef"):
        return None
    m = re.match(r"^(?P<pre>[^()]*?)\b(?P<name>gpuport_\w+)\s*\((?P<params>.*)\)$", decl)
    if not m:
        return None
    pre = m.group("pre").split()
    kind = "api"
    qual = []
    if "GPUPORT_DEV" in pre:
        kind, qual = "device", ["__device__"]
    elif "GPUPORT_HD" in pre:
        kind = "hd"
    elif "__device__" in pre:
        kind, qual = ("hd", []) if "__host__" in pre else ("device", ["__device__"])
    elif "inline" in pre:
        kind = "inline"
    elif "GPUPORT_API" not in pre:
        return None
    drop = {"GPUPORT_API", "GPUPORT_DEV", "GPUPORT_HD", "static", "inline", "__forceinline__",
            "__host__", "__device__"}
    ret = " ".join(qual + [w for w in pre if w not in drop])
    params = [p for p in (parse_param(x) for x in split_params(m.group("params"))) if p]
    return {"name": m.group("name"), "kind": kind,
            "ret": ret if ret.endswith("*") else ret + " ", "params": params}


def parse_doc(lines, where):
    """A call's comment: description blocks (('p', text) or ('ul', [items])),
    @param, @retval and @return."""
    doc = {"desc": [], "params": [], "retvals": [], "returns": None}
    cur = None      # the tag being continued: a dict with "text"
    para = None     # the paragraph being continued (a list of words)
    items = None    # the list being continued
    item_indent = 0

    def end_text():
        nonlocal para, items
        if para is not None:
            doc["desc"].append(("p", " ".join(para)))
        if items is not None:
            doc["desc"].append(("ul", [" ".join(x) for x in items]))
        para = items = None

    for indent, text in lines:
        if not text:
            end_text()
            cur = None
            continue
        if text.startswith("@") or text.startswith("\\"):
            end_text()
            m = re.match(r"[@\\](\w+)(\[[a-z,]+\])?\s*(.*)$", text)
            tag, rest = m.group(1), m.group(3)
            if tag == "param":
                pm = re.match(r"(\w+)\s*(.*)$", rest)
                cur = {"dir": (m.group(2) or "")[1:-1], "name": pm.group(1), "text": pm.group(2)}
                doc["params"].append(cur)
            elif tag == "retval":
                rm = re.match(r"((?:[A-Z][A-Z0-9_]*,\s*)*\w+)\s*(.*)$", rest)
                cur = {"names": [x.strip() for x in rm.group(1).split(",")], "text": rm.group(2)}
                doc["retvals"].append(cur)
            elif tag in ("return", "returns"):
                cur = {"text": rest}
                doc["returns"] = cur
            else:
                die("%s: tag @%s is not one this generator knows" % (where, tag))
            continue
        if cur is not None:
            cur["text"] = (cur["text"] + " " + text).strip()
            continue
        if text.startswith("- "):
            if para is not None:
                doc["desc"].append(("p", " ".join(para)))
                para = None
            if items is None:
                items = []
            items.append([text[2:]])
            item_indent = indent
            continue
        if items is not None and indent > item_indent:
            items[-1].append(text)
            continue
        if items is not None:
            end_text()
        if para is None:
            para = []
        para.append(text)
    end_text()
    return doc


def read_header(path, header):
    """The calls a header documents, in order."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    toks = tokens(text)
    calls = []
    group = None
    for k, tok in enumerate(toks):
        if tok[0] != "doc":
            continue
        body, line = tok[1], tok[2]
        where = "%s:%d" % (header, line)
        lines = comment_lines(body)
        words = [t for _, t in lines]
        if any(re.match(r"[@\\]file\b", t) for t in words):
            continue
        if words == ["@}"]:
            group = None
            continue
        if any(re.match(r"@name\b", t) for t in words):
            title = None
            rest = []
            for indent, t in lines:
                if title is None and t.startswith("@name"):
                    title = t[len("@name"):].strip()
                    continue
                t = t.replace("@{", "").rstrip()
                rest.append((indent, t))
            gdoc = parse_doc(rest, where)
            group = {"title": title, "desc": gdoc["desc"]}
            continue
        nxt = toks[k + 1][1] if k + 1 < len(toks) and toks[k + 1][0] == "code" else ""
        decl = first_decl(nxt)
        if not decl:
            continue
        call = parse_decl(decl)
        if not call or INTERNAL.match(call["name"]):
            continue
        call["header"] = header
        call["where"] = where
        call["doc"] = parse_doc(lines, where)
        call["group"] = group
        calls.append(call)
    return calls


# ---- roff ----

def plain(text):
    """Text for a roff text line: backslashes escaped, other than ASCII as
    groff's \\[uXXXX]."""
    text = text.replace("\\", "\\e")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def inline(text, pages):
    """A comment's text in roff: `code` in italics, the calls that have a
    page in bold."""
    out = []
    for k, part in enumerate(text.split("`")):
        part = plain(part)
        if k % 2:
            out.append("\\fI" + part + "\\fP")
        else:
            out.append(re.sub(r"\b(gpuport_\w+)\b",
                              lambda m: "\\fB" + m.group(1) + "\\fP" if m.group(1) in pages
                              else m.group(1), part))
    return "".join(out)


def fill(text):
    """Roff source lines of a text, broken at blanks, none starting with a
    control character."""
    lines, cur = [], ""
    for w in text.split():
        if cur and len(cur) + 1 + len(w) > WIDTH:
            lines.append(cur)
            cur = w
        else:
            cur = cur + " " + w if cur else w
    if cur:
        lines.append(cur)
    return ["\\&" + l if l[0] in ".'" else l for l in lines]


def blocks(desc, pages):
    out = []
    for kind, content in desc:
        if kind == "p":
            out.append(".PP")
            out += fill(inline(content, pages))
        else:
            for item in content:
                out.append(".IP \\(bu 2")
                out += fill(inline(item, pages))
    return out


def prototype(call):
    """The call's synopsis lines: bold, the parameters' names italic, broken
    before a parameter that would pass the width."""
    if call["kind"] == "macro":
        head = "#define " + call["name"] + "("
    else:
        head = call["ret"] + call["name"] + "("
    params = call["params"]
    if not params:
        return ["\\fB" + plain(head) + ("void);" if call["kind"] != "macro" else ")") + "\\fR"]
    lines, cur, cur_len = [], "\\fB" + plain(head), len(head)
    end = ")" if call["kind"] == "macro" else ");"
    for k, (t, name) in enumerate(params):
        tail = end if k == len(params) - 1 else ","
        piece = plain(t) + "\\fI" + name + "\\fB" + tail
        plen = len(t) + len(name) + len(tail)
        sep = "" if k == 0 else " "
        if k and cur_len + 1 + plen > WIDTH:
            lines.append(cur + "\\fR")
            cur, cur_len = "\\fB" + " " * len(head) + piece, len(head) + plen
        else:
            cur, cur_len = cur + sep + piece, cur_len + len(sep) + plen
    lines.append(cur + "\\fR")
    return lines


def brief(doc):
    """NAME's text: the comment's first sentence, up to a colon or
    semicolon outside parentheses and without what is in them, in lower
    case where it starts with a capitalized word."""
    if not doc["desc"] or doc["desc"][0][0] != "p":
        return ""
    text = doc["desc"][0][1]
    m = re.search(r"\.(\s|$)", text)
    if m:
        text = text[:m.start()]
    stack = []      # open brackets: ( drops what it holds, [ keeps it
    kept = ""
    for k, ch in enumerate(text):
        dropping = "(" in stack
        if ch in "([":
            stack.append(ch)
        elif ch in ")]" and stack:
            # a range [a, b) closes its [ with a )
            if stack.pop() == "(":
                continue
        elif ch in ":;" and not stack and text[k + 1:k + 2] == " ":
            break
        if not dropping and "(" not in stack:
            kept += ch
    text = re.sub(r"\s+([,.])", r"\1", " ".join(kept.replace("`", "").split()))
    if re.match(r"^[A-Z][a-z]*\b", text) and "_" not in text.split()[0]:
        text = text[0].lower() + text[1:]
    return plain(text)


def note(call):
    """What kind of function the call is, when the prototype does not say."""
    if call["kind"] == "device":
        return ("A device function (inline, \\fB__device__\\fP): called from CUDA kernels; "
                "<gpuport/gpuport_device.h> declares it to code that nvcc compiles "
                "(__CUDACC__ defined).")
    if call["kind"] == "hd":
        return ("An inline function of the header, for host and device code alike "
                "(\\fB__host__ __device__\\fP under nvcc).")
    return None


def page(name, forms, pages, owner, date, version):
    main = forms[0]
    doc = main["doc"]
    header = main["header"]
    names = [name] + [f["name"] for f in forms[1:] if f["name"] != name]
    out = []
    out.append('.\\" %s(3), generated from include/gpuport/%s by scripts/gen-man3.py;'
               % (name, header))
    out.append('.\\" do not edit: "make man3" rewrites it from the header\'s comments.')
    out.append('.TH %s 3 %s "gpuport %s" "gpuport"' % (name.upper(), date, version))
    # no hyphenation: the text is full of identifiers
    out.append(".nh")
    out.append(".SH NAME")
    b = brief(doc)
    if not b:
        die("%s: %s has no first sentence to name it by" % (main["where"], name))
    out.append("%s \\- %s" % (", ".join(plain(x) for x in names), b))

    out.append(".SH SYNOPSIS")
    out.append(".nf")
    out.append(".B #include <gpuport/%s>" % INCLUDED_BY.get(header, header))
    for f in forms:
        out.append(".PP")
        out += prototype(f)
    out.append(".fi")

    out.append(".SH LIBRARY")
    if all(f["kind"] in ("device", "hd") for f in forms):
        out.append("None: an inline function of <gpuport/%s>." % header)
    else:
        lib, flags = LIBRARY[header]
        out.append("%s (\\fI%s\\fP)" % (lib, flags.replace("-", "\\-")))

    out.append(".SH DESCRIPTION")
    out += blocks(doc["desc"], pages)
    if doc["params"]:
        out.append(".PP")
        out.append("Arguments:")
        for p in doc["params"]:
            out.append(".TP")
            out.append("\\fI%s\\fP%s" % (p["name"], " (%s)" % p["dir"] if p["dir"] else ""))
            out += fill(inline(p["text"], pages)) or ["\\&"]
    for f in forms:
        text = note(f)
        if text and (f is main or f["kind"] != main["kind"]):
            out.append(".PP")
            if f is not main:
                text = "\\fB%s\\fP(): %s" % (f["name"], text[0].lower() + text[1:])
            out += fill(text)
    for f in forms[1:]:
        if f["doc"]["desc"]:
            out.append(".PP")
            label = "\\fB%s\\fP()%s:" % (f["name"], " (the macro)" if f["kind"] == "macro" else "")
            first = f["doc"]["desc"][0]
            rest = f["doc"]["desc"][1:]
            out += fill(label + " " + inline(first[1], pages)) if first[0] == "p" else [label]
            out += blocks(rest, pages)
    if main["group"] and main["group"]["desc"]:
        out.append('.SS "%s"' % plain(main["group"]["title"]).replace('"', "\\(dq"))
        body = blocks(main["group"]["desc"], pages)
        out += body[1:] if body and body[0] == ".PP" else body

    out.append(".SH RETURN VALUE")
    rv = []
    if doc["returns"]:
        rv.append(".PP")
        rv += fill(inline(doc["returns"]["text"], pages))
    for r in doc["retvals"]:
        rv.append(".TP")
        rv.append(", ".join("\\fI%s\\fP" % n if n == "other" else "\\fB%s\\fP" % n
                            for n in r["names"]))
        rv += fill(inline(r["text"], pages)) or ["\\&"]
    if not rv:
        if main["ret"].strip() != "void" and main["kind"] != "macro":
            die("%s: %s returns %s but its comment says nothing of it (@return or @retval)"
                % (main["where"], name, main["ret"].strip()))
        rv = ["None."]
    if rv[0] == ".PP":
        rv = rv[1:]
    out += rv

    # every call the page names, the makers of its handles and its
    # counterpart, but its own forms
    text = "\n".join(out)
    related = set(re.findall(r"\\fB(gpuport_\w+)\\fP", text))
    for f in forms:
        for t, _ in f["params"]:
            related.update(MAKER[w] for w in re.findall(r"\w+", t) if w in MAKER)
    for a, b in COUNTERPARTS:
        for x, y in ((a, b), (b, a)):
            if name.endswith(x) and name[:-len(x)] + y in pages:
                related.add(name[:-len(x)] + y)
    seen = sorted(set(owner.get(s, s) for s in related) - set(names))
    out.append(".SH SEE ALSO")
    for s in seen:
        out.append(".BR %s (3)," % s)
    out.append(".BR gpuport (7)")
    return "\n".join(out) + "\n"


def release_line(srcdir):
    path = os.path.join(srcdir, "man", "gpuport.7")
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r'^\.TH GPUPORT 7 (\S+) "gpuport (\S+)" "gpuport"$', line)
            if m:
                return m.group(1), m.group(2)
    die("%s: no '.TH GPUPORT 7 DATE \"gpuport VERSION\" \"gpuport\"' line" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srcdir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     os.pardir))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    date, version = release_line(args.srcdir)

    calls = []
    for h in HEADERS:
        calls += read_header(os.path.join(args.srcdir, "include", "gpuport", h), h)
    byname = {}
    for c in calls:
        byname.setdefault(c["name"], []).append(c)
    # a call's forms: a macro of its own name, its _v and _tagged
    owner = {}
    for name in byname:
        for suf in ALIAS_SUFFIXES:
            if name.endswith(suf) and name[:-len(suf)] in byname:
                owner[name] = name[:-len(suf)]
    forms = {}
    for name, cs in byname.items():
        if name in owner:
            continue
        # the documented function first, then the macro of its name
        cs = sorted(cs, key=lambda c: c["kind"] == "macro")
        forms[name] = list(cs)
    for alias, base in sorted(owner.items()):
        forms[base] += byname[alias]
    pages = set(byname)

    mandir = os.path.join(args.out, "man3")
    os.makedirs(mandir, exist_ok=True)
    written = []
    for name in sorted(forms):
        with open(os.path.join(mandir, name + ".3"), "w", encoding="utf-8") as f:
            f.write(page(name, forms[name], pages, owner, date, version))
        written.append(name)
    for alias, base in sorted(owner.items()):
        with open(os.path.join(mandir, alias + ".3"), "w", encoding="utf-8") as f:
            f.write(".so man3/%s.3\n" % base)
        written.append(alias)
    written.sort()
    with open(os.path.join(args.out, "man3.am"), "w", encoding="utf-8") as f:
        f.write("# The section-3 man pages, one per public call and a .so page for each of\n"
                "# its other forms: generated with them by scripts/gen-man3.py (make man3).\n")
        f.write("dist_man3_MANS =")
        for name in written:
            f.write(" \\\n\tman/man3/%s.3" % name)
        f.write("\n")


if __name__ == "__main__":
    main()
