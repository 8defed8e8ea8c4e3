// Counts of a collection's nodes and parent edges, including retired ones.
MATCH (n:Node {collection: $collection})
OPTIONAL MATCH (n)-[r:PARENT]->()
RETURN count(DISTINCT n) AS nodes, count(r) AS edges,
       sum(CASE WHEN r IS NOT NULL AND r.until IS NULL THEN 1 ELSE 0 END) AS current_edges
