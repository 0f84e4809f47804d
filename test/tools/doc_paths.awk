# The repository paths a document names, one "FILE:LINE PATH" line each;
# see doc_paths.sh. A path starts at a word boundary with one of the tree's
# top folders; {a,b} stands for both (expanded here); roff escapes of man
# pages are undone first. Patterns (a * or <...> in the path) are skipped.
# POSIX awk (mawk, gawk).

function emit(p,    lb, rb, pre, post, alts, n, i) {
    lb = index(p, "{")
    if (lb == 0) {
        sub(/[.,:;]+$/, "", p)
        if (p != "")
            print FILENAME ":" FNR " " p
        return
    }
    rb = index(substr(p, lb), "}")
    if (rb == 0)
        return
    pre = substr(p, 1, lb - 1)
    post = substr(p, lb + rb)
    n = split(substr(p, lb + 1, rb - 2), alts, ",")
    for (i = 1; i <= n; i++)
        emit(pre alts[i] post)
}

{
    line = $0
    gsub(/\\-/, "-", line)
    gsub(/\\&/, "", line)
    gsub(/\\f[BIRP]/, "", line)
    top = "(\\.ci|docs|scripts|test|tools|examples|man|include|src|mpi|m4)/"
    while (match(line, "(^|[^A-Za-z0-9_./~-])" top "[A-Za-z0-9_.,{}/*<>-]*")) {
        tok = substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
        if (tok !~ "^" top)
            tok = substr(tok, 2)
        if (tok ~ /[*<>]/)
            continue
        # a comma ends the path unless it is inside braces
        out = ""
        depth = 0
        for (i = 1; i <= length(tok); i++) {
            c = substr(tok, i, 1)
            if (c == "{") depth++
            if (c == "}") depth--
            if (c == "," && depth == 0) break
            out = out c
        }
        emit(out)
    }
}
