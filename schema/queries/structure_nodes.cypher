// Every node of a collection that was alive at batch $as_of: a node lives in the
// intervals lives_since[k] <= b < lives_until[k] (it can be retired and come back).
MATCH (n:Node {collection: $collection})
WHERE any(k IN range(0, size(n.lives_since) - 1)
          WHERE n.lives_since[k] <= $as_of AND n.lives_until[k] > $as_of)
RETURN n.id AS id, n.leaf AS leaf, n.size AS size, n.score AS score,
       n.level_lo AS level_lo, n.level_hi AS level_hi
ORDER BY id
