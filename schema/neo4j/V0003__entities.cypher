// Stable entity ids (DESIGN §3): (:Entity) nodes with IN_ENTITY memberships, BECAME
// events and NEAR k-NN edges between mentions. Writes find entities by `key`.
CREATE CONSTRAINT er_entity_key IF NOT EXISTS FOR (x:Entity) REQUIRE x.key IS UNIQUE;
CREATE INDEX er_entity_collection_id IF NOT EXISTS FOR (x:Entity) ON (x.collection, x.id);
