// The strongest stored k-NN edges between two sets of mention node ids ($left, $right),
// either direction, written at or before batch $as_of.
UNWIND $left AS a
MATCH (x:Node:Mention {collection: $collection, id: a})-[n:NEAR]-(y:Mention {collection: $collection})
WHERE y.id IN $right AND n.since <= $as_of
RETURN DISTINCT x.id AS left, y.id AS right, x.external_id AS left_external_id,
       y.external_id AS right_external_id, n.sim AS sim
ORDER BY sim DESC, left, right
LIMIT $limit
