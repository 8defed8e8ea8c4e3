// Lints Cypher statements with Neo4j's own parser and semantic analysis, offline.
//
// stdin:  JSON list of {"name": str, "cypher": str, "parameters": {name: value}}
// stdout: JSON {"checked": n, "results": [{"name", "diagnostics": [{severity, message,
//         line, character}]}]}; severity 1 is an error, 2 a warning (LSP numbering).
// Parameters are declared from each statement's own parameter map, so a statement that
// reads a parameter er does not send is reported ("Parameter $x is not defined.").
import { readFileSync } from 'node:fs';
import { lintCypherQuery } from '@neo4j-cypher/language-support';

const CYPHER_VERSION = 'CYPHER 5'; // the Cypher that Neo4j 5 runs by default

function lintOne({ name, cypher, parameters }) {
  const schema = { defaultLanguage: CYPHER_VERSION, parameters: parameters ?? {} };
  const { diagnostics } = lintCypherQuery(cypher, schema);
  return {
    name,
    diagnostics: diagnostics.map((d) => ({
      severity: d.severity,
      message: d.message,
      line: d.range.start.line + 1,
      character: d.range.start.character + 1,
    })),
  };
}

const statements = JSON.parse(readFileSync(0, 'utf8'));
const results = statements.map(lintOne);
process.stdout.write(JSON.stringify({ checked: results.length, results }) + '\n');
