// Registers the property keys of node lifetimes, write stamps and external ids
// (see V0002 for why FalkorDB needs every key registered before data is written).
CREATE (a:Node {key: '', collection: '', id: -1, lives_since: [0], lives_until: [0], stamp: 0,
        external_id: ''})
DELETE a;
