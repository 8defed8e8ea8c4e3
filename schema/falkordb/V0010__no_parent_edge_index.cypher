// The PARENT (since, until) index, dropped from graphs that earlier versions made;
// `er init` skips it when it is not there.
// Why: no statement reads it (FalkorDB 4.16 loads it from a snapshot missing edges,
// so the reads test `since + 0`, and retiring an edge walks its child's few parents),
// yet every edge added enters it and every edge retired is indexed again. Each
// re-indexing leaves a deleted entry, and FalkorDB's index garbage collector, run on
// a timer while any are left, forks the server and scans the whole index: its work
// grows with the graph, not with the batch (bench/RESULTS.md, "End to end").
DROP INDEX FOR ()-[p:PARENT]-() ON (p.since);
DROP INDEX FOR ()-[p:PARENT]-() ON (p.until);
