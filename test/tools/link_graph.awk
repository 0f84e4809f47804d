# The link graph of libgpuport_core's objects; see link_graph.sh, which feeds
# it "ALLOW name" lines (the names the transport interface's headers use),
# then "object symbol nm-type" lines sorted by object, then symbol, and
# passes the folder table as -v layers=FILE (test/tools/layers.txt). An edge
# A -> B: A has an undefined symbol that B defines. POSIX awk (mawk, gawk).
#
# Folders: src/*.c is "base"; src/<d>/... is "<d>"; src/transport/*.c (the
# registry) is "transport"; src/transport/<X>/... is "transport/<X>". Classes,
# for the name rules: src/transport/<X>/... is transport X;
# src/transport/transport.* and src/transport/registry.* are the registry;
# the rest is core. Exit 1 on any use across folders that the table does not
# allow, any use of a transport by the registry but its tables, any
# transport use of the core that the interface does not name, or a cycle.

BEGIN {
    nobj = 0
    nund = 0
    nedge = 0
    bad = 0
    lname = layers_name != "" ? layers_name : layers
    read_layers()
}

# The table: "FOLDER: USES..." lines, # to the end of a line a comment. The
# left is a folder, "transport/*" (a row for every transport folder) or one
# file (FOLDER/NAME.c, or NAME.c of base: a row that adds to its folder's);
# the right names folders, "transport/*" or single files (only that file of
# its folder may be used).
function read_layers(line, n, w, i, from) {
    nlayers = 0
    if (layers == "")
        return
    while ((getline line < layers) > 0) {
        sub(/#.*/, "", line)
        n = split(line, w, /[ \t]+/)
        i = 1
        if (w[1] == "")
            i = 2
        if (i > n)
            continue
        from = w[i]
        if (from !~ /:$/) {
            print "FAIL: " lname ": a row starts with FOLDER: (" line ")"
            layer_err = 1
            continue
        }
        sub(/:$/, "", from)
        if (from in row) {
            print "FAIL: " lname ": two rows for " from
            layer_err = 1
        }
        row[from] = " "
        rows[++nlayers] = from
        for (i++; i <= n; i++)
            if (w[i] != "")
                row[from] = row[from] w[i] " "
    }
    close(layers)
}

$1 == "ALLOW" && NF == 2 {
    allow[$2] = 1
    nallow++
    next
}

{
    o = $1
    s = $2
    t = $3
    if (!(o in seen)) {
        seen[o] = 1
        obj[++nobj] = o
    }
    if (t == "U" || t == "w" || t == "v") {
        nund++
        und_o[nund] = o
        und_s[nund] = s
    } else if (t ~ /^[A-TV-Z]$/ || t == "u" || t == "i") {
        if (!(s in def))
            def[s] = o
    }
}

function cls(o, p) {
    if (o ~ /^src\/transport\/[^\/]+\//) {
        p = o
        sub(/^src\/transport\//, "", p)
        sub(/\/.*/, "", p)
        return p
    }
    if (o ~ /^src\/transport\/(transport|registry)\.[^\/]*$/)
        return "(registry)"
    return "(core)"
}

function what(o, c) {
    c = cls(o)
    if (c == "(core)")
        return o " (core)"
    if (c == "(registry)")
        return o " (registry)"
    return o " (transport " c ")"
}

function folder(o, p) {
    if (o ~ /^src\/transport\/[^\/]+\//) {
        p = o
        sub(/^src\/transport\//, "", p)
        sub(/\/.*/, "", p)
        return "transport/" p
    }
    if (o ~ /^src\/[^\/]+\//) {
        p = o
        sub(/^src\//, "", p)
        sub(/\/.*/, "", p)
        return p
    }
    if (o ~ /^src\/[^\/]*$/)
        return "base"
    return "(outside src/)"
}

# The object's file as the table names it: its path under src/.
function file_of(o, p) {
    p = o
    sub(/^src\//, "", p)
    return p
}

# Whether row r lets its folder use object b (of folder fb).
function row_allows(r, b, fb) {
    if (!(r in row))
        return 0
    if (index(row[r], " " fb " ") || index(row[r], " " file_of(b) " "))
        return 1
    return fb ~ /^transport\// && index(row[r], " transport/* ")
}

# Whether the table lets object a use object b.
function layer_allows(a, b, fa, fb) {
    fa = folder(a)
    fb = folder(b)
    if (fa == fb)
        return 1
    if (row_allows(file_of(a), b, fb) || row_allows(fa, b, fb))
        return 1
    return fa ~ /^transport\// && row_allows("transport/*", b, fb)
}

# Inserts item into a space-separated list kept sorted.
function insert_sorted(list, item, parts, n, i, out, done) {
    n = split(list, parts, " ")
    out = ""
    done = 0
    for (i = 1; i <= n; i++) {
        if (!done && item < parts[i]) {
            out = out " " item
            done = 1
        }
        out = out " " parts[i]
    }
    if (!done)
        out = out " " item
    return out
}

function first_sym(list, parts) {
    split(list, parts, " ")
    return parts[1]
}

# Tarjan's strongly connected components.
function strong(v, list, n, i, w) {
    num[v] = ++counter
    low[v] = counter
    stack[++sp] = v
    onstack[v] = 1
    n = split(adj[v], list, " ")
    for (i = 1; i <= n; i++) {
        w = list[i]
        if (!(w in num)) {
            strong(w)
            if (low[w] < low[v])
                low[v] = low[w]
        } else if (onstack[w] && num[w] < low[v]) {
            low[v] = num[w]
        }
    }
    if (low[v] == num[v]) {
        nscc++
        do {
            w = stack[sp--]
            onstack[w] = 0
            scc[w] = nscc
        } while (w != v)
    }
}

# Shortest path from -> to inside one component; fills path[1..npath].
function bfs(from, to, comp, q, head, tail, u, list, n, i, w, prev, got) {
    split("", prev)
    split("", got)
    head = 1
    tail = 1
    q[1] = from
    got[from] = 1
    while (head <= tail) {
        u = q[head++]
        if (u == to)
            break
        n = split(adj[u], list, " ")
        for (i = 1; i <= n; i++) {
            w = list[i]
            if (scc[w] == comp && !(w in got)) {
                got[w] = 1
                prev[w] = u
                q[++tail] = w
            }
        }
    }
    npath = 0
    for (u = to; u != from; u = prev[u])
        rpath[++npath] = u
    rpath[++npath] = from
    for (i = 1; i <= npath; i++)
        path[i] = rpath[npath + 1 - i]
}

END {
    for (i = 1; i <= nund; i++) {
        a = und_o[i]
        s = und_s[i]
        if (!(s in def))
            continue
        b = def[s]
        if (b == a)
            continue
        k = a SUBSEP b
        if (!(k in esyms)) {
            esyms[k] = s
            adj[a] = insert_sorted(adj[a], b)
            nedge++
        } else {
            esyms[k] = esyms[k] " " s
        }
    }

    # transport -> core: only what the transport interface names
    ntl = 0
    nundecl = 0
    for (i = 1; i <= nobj; i++)
        if (cls(obj[i]) !~ /^\(/)
            ntl++
    for (i = 1; i <= nund; i++) {
        a = und_o[i]
        s = und_s[i]
        if (cls(a) ~ /^\(/ || !(s in def) || cls(def[s]) !~ /^\(/ || (s in allow))
            continue
        if (nundecl++ == 0)
            print "Transport uses of the core that src/transport/tl_core.h does not declare " \
                "(a transport reaches the core only through tl_core.h, transport.h and the " \
                "service headers tl_core.h names; declare a service there, or use one):"
        print "  " what(a) " -> " what(def[s]) ": " s
    }

    # the folders: what each uses of the others (the matrix, printed), and
    # every use the table does not allow
    flist = ""
    for (i = 1; i <= nobj; i++) {
        f = folder(obj[i])
        if (!(f in nfobj))
            flist = insert_sorted(flist, f)
        nfobj[f]++
    }
    nfold = split(flist, folders, " ")
    for (i = 1; i <= nund; i++) {
        a = und_o[i]
        s = und_s[i]
        if (!(s in def) || folder(a) == folder(def[s]))
            continue
        k = folder(a) SUBSEP folder(def[s])
        if ((k SUBSEP s) in fseen)
            continue
        fseen[k, s] = 1
        fuse[k]++
    }
    print "Folders (objects) and what each uses of the others (distinct symbols):"
    for (i = 1; i <= nfold; i++) {
        fa = folders[i]
        line = ""
        for (j = 1; j <= nfold; j++)
            if ((fa, folders[j]) in fuse)
                line = line (line == "" ? " " : ", ") folders[j] " " fuse[fa, folders[j]]
        print "  " fa " (" nfobj[fa] "):" (line == "" ? " nothing" : line)
    }
    nrowless = 0
    for (i = 1; i <= nfold; i++) {
        fa = folders[i]
        if ((fa in row) || (fa ~ /^transport\// && ("transport/*" in row)))
            continue
        if (nrowless++ == 0)
            print "Folders without a row in " lname " (place each among the layers):"
        print "  " fa
    }
    nlayer = 0
    for (i = 1; i <= nobj; i++) {
        a = obj[i]
        n = split(adj[a], targets, " ")
        for (j = 1; j <= n; j++) {
            b = targets[j]
            if (layer_allows(a, b))
                continue
            if (nlayer++ == 0)
                print "Uses against " lname " (the left object, of the folder in brackets, " \
                    "uses what the right one defines; the table does not let the left " \
                    "folder use the right one):"
            print "  " a " (" folder(a) ") -> " b " (" folder(b) "): " esyms[a, b]
        }
    }

    # the registry uses a transport's ops table, gpuport_transport_<X>, and
    # its settings table, gpuport_<X>_settings: nothing else
    nbound = 0
    for (i = 1; i <= nobj; i++) {
        a = obj[i]
        if (cls(a) != "(registry)")
            continue
        n = split(adj[a], targets, " ")
        for (j = 1; j <= n; j++) {
            b = targets[j]
            cb = cls(b)
            if (cb ~ /^\(/)
                continue
            m = split(esyms[a, b], list, " ")
            syms = ""
            for (x = 1; x <= m; x++)
                if (list[x] != "gpuport_transport_" cb && list[x] != "gpuport_" cb "_settings")
                    syms = syms (syms == "" ? "" : " ") list[x]
            if (syms == "")
                continue
            if (nbound++ == 0)
                print "Registry uses of a transport but its ops and settings tables:"
            print "  " what(a) " -> " what(b) ": " syms
        }
    }

    # cycles: for each strongly connected component (a set of objects each
    # reachable from every other), its members, then one cycle for each of
    # its edges that no earlier cycle showed, so every edge to cut is named
    for (i = 1; i <= nobj; i++)
        if (!(obj[i] in num))
            strong(obj[i])
    for (i = 1; i <= nobj; i++)
        members[scc[obj[i]]]++
    ncycle = 0
    ncomp = 0
    for (c = 1; c <= nobj; c++) {
        a0 = obj[c]
        comp = scc[a0]
        if (members[comp] < 2 || (comp in shown))
            continue
        shown[comp] = 1
        if (ncomp++ == 0)
            print "Cycles (each arrow: the left object uses the symbol in brackets, which the right one defines):"
        line = ""
        for (i = 1; i <= nobj; i++)
            if (scc[obj[i]] == comp)
                line = line " " obj[i]
        print "  objects in one cycle:" line
        for (i = 1; i <= nobj; i++) {
            a = obj[i]
            if (scc[a] != comp)
                continue
            n = split(adj[a], targets, " ")
            for (j = 1; j <= n; j++) {
                b = targets[j]
                if (scc[b] != comp || ((a, b) in covered))
                    continue
                bfs(b, a, comp)
                line = a
                prev_node = a
                for (x = 1; x <= npath; x++) {
                    line = line " -> " path[x] " (" first_sym(esyms[prev_node, path[x]]) ")"
                    covered[prev_node, path[x]] = 1
                    prev_node = path[x]
                }
                print "    " line
                ncycle++
            }
        }
    }

    print nobj " objects (" ntl " of transports) in " nfold " folders, " nedge " edges, " nallow \
        " names in the transport interface, " nlayers " rows in " lname ": " nlayer \
        " uses against the folder table, " nrowless " folders without a row, " nbound \
        " registry uses beyond the tables, " nundecl " undeclared transport uses of the core, " \
        ncomp " sets of objects in cycles (" ncycle " cycles shown)"
    if (ntl == 0 || nallow == 0 || nlayers == 0)
        print "no " (ntl == 0 ? "transport objects" : nallow == 0 ? \
            "names of the transport interface" : "rows of the folder table") \
            " found: nothing was checked"
    if (nlayer || nrowless || layer_err || nbound || ncycle || nundecl || ntl == 0 || \
        nallow == 0 || nlayers == 0) {
        print "FAIL link graph"
        exit 1
    }
    print "PASS link graph"
}
