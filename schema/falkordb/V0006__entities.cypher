// Stable entity ids (DESIGN §3): (:Entity) nodes, (:Mention)-[:IN_ENTITY {since, until}]->(:Entity)
// memberships, (:Entity)-[:BECAME {batch, kind}]->(:Entity) events, and the k-NN evidence
// (:Mention)-[:NEAR {sim, since}]->(:Mention) that `er query explain` shows.
// Writes find entities by `key`; reads and users by (collection, id).
CREATE INDEX FOR (x:Entity) ON (x.key);
CREATE INDEX FOR (x:Entity) ON (x.collection, x.id);
// Register the new property keys before any data is written (see V0002 for why).
CREATE (m:Node {key: '', collection: '', id: -1})
       -[i:IN_ENTITY {since: 0, until: 0}]->(x:Entity {key: '', collection: '', id: -1, since: 0, until: 0})
       -[b:BECAME {batch: 0, kind: ''}]->(y:Entity {key: ' ', collection: '', id: -2}),
       (m)-[n:NEAR {sim: 0.0, since: 0}]->(z:Node {key: ' ', collection: '', id: -2})
DELETE i, b, n, m, x, y, z;
