// Every parent edge of a collection that was current at batch $as_of.
// `r.since + 0`: not answered from a PARENT (since, until) index (Neo4j's; FalkorDB's
// before schema V0010, which FalkorDB 4.16 loaded from its snapshot missing an edge now
// and then: tests/integration/test_embedded_falkordb.py); the collection's nodes are
// found by their index instead.
MATCH (c:Node {collection: $collection})-[r:PARENT]->(p:Node)
WHERE r.since + 0 <= $as_of AND (r.until IS NULL OR r.until > $as_of)
RETURN c.id AS child, p.id AS parent
ORDER BY child, parent
