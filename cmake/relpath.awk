# relpath.awk: the relative path from directory `from` to directory `to`
# (awk -v from=/usr/lib/cmake/gpuport -v to=/usr/include -f relpath.awk
# prints ../../../include). Both must be absolute; "." and ".." components
# and repeated or trailing slashes are resolved as written (no symbolic
# links are followed: Makefile.am makes the CMake package's paths with it).
function norm(p, out,    n, i, c, parts, depth) {
    n = split(p, parts, "/")
    depth = 0
    for (i = 1; i <= n; i++) {
        c = parts[i]
        if (c == "" || c == ".")
            continue
        if (c == "..") {
            if (depth > 0)
                depth--
            continue
        }
        out[++depth] = c
    }
    return depth
}
BEGIN {
    if (substr(from, 1, 1) != "/" || substr(to, 1, 1) != "/") {
        print "relpath.awk: not absolute: '" from "' and '" to "'" > "/dev/stderr"
        exit 1
    }
    nf = norm(from, f)
    nt = norm(to, t)
    common = 0
    while (common < nf && common < nt && f[common + 1] == t[common + 1])
        common++
    rel = ""
    for (i = common + 1; i <= nf; i++)
        rel = rel (rel == "" ? "" : "/") ".."
    for (i = common + 1; i <= nt; i++)
        rel = rel (rel == "" ? "" : "/") t[i]
    print (rel == "" ? "." : rel)
}
