// Independent validation of constrained decoding: every schema below is compiled by qwenserve,
// walked with random choices among the allowed tokens (real Qwen3 tokenizer, several seeds) by
// qwenserve_grammar_walk, and every finished output is checked by an independent engine: ajv
// (JSON Schema 2020-12) for schemas, JavaScript RegExp (full match, 'u' flag) for regexes and
// the GBNF cases (each carries an equivalent regex written by hand), set membership for choices.
// Schemas marked `bounded` bound every length: at least 95% of their walks must finish (pick a
// stop token) within 256 tokens. Cases with `error` must fail to compile with a message containing
// that text.
//
//   node validate_walks.mjs WALK_BINARY TOKENIZER_DIR
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';

const [walkBin, tokenizerDir] = process.argv.slice(2);
const SEEDS = 6;

const str = (extra = {}) => ({ type: 'string', maxLength: 6, ...extra });
const schemas = [
  ['string_max', { type: 'string', maxLength: 10 }, true],
  ['string_min_max', { type: 'string', minLength: 3, maxLength: 6 }, true],
  ['string_exact_len', { type: 'string', minLength: 4, maxLength: 4 }, true],
  ['integer', { type: 'integer' }, true],
  ['integer_range', { type: 'integer', minimum: -50, maximum: 50 }, true],
  ['integer_exclusive', { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 }, true],
  ['integer_big_range', { type: 'integer', minimum: 1234, maximum: 987654 }, true],
  ['integer_min_only', { type: 'integer', minimum: 100 }, true],
  ['number', { type: 'number' }, true],
  ['number_range', { type: 'number', minimum: 0.5, maximum: 99.5 }, true],
  ['number_exclusive', { type: 'number', exclusiveMinimum: -1, exclusiveMaximum: 1 }, true],
  ['number_max_negative', { type: 'number', maximum: -10.5 }, true],
  ['boolean', { type: 'boolean' }, true],
  ['null', { type: 'null' }, true],
  ['union_string_null', { type: ['string', 'null'], maxLength: 5 }, true],
  ['union_int_bool_null', { type: ['integer', 'boolean', 'null'] }, true],
  ['enum_mixed', { enum: ['red', 'green', 1, null, true, { a: 1 }, [1, 2]] }, true],
  ['enum_unicode', { enum: ['café', 'naïve', '日本', 'a"b\\c'] }, true],
  ['const_object', { const: { x: [1, 'two'], y: null } }, true],
  ['object_all_required', { type: 'object', properties: { name: str(), age: { type: 'integer', minimum: 0, maximum: 120 } }, required: ['name', 'age'], additionalProperties: false }, true],
  ['object_some_optional', { type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'integer', maximum: 9, minimum: 0 }, c: { type: 'null' } }, required: ['b'] }, true],
  ['object_all_optional', { type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'null' }, c: { const: 'k' } } }, true],
  ['object_additional_true', { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['id'], additionalProperties: true }, false],
  ['object_additional_schema', { type: 'object', properties: { id: { type: 'boolean' } }, additionalProperties: { type: 'integer', minimum: 0, maximum: 9 } }, false],
  ['object_any', { type: 'object' }, false],
  ['object_required_not_listed', { type: 'object', properties: { a: { type: 'null' } }, required: ['a', 'zz'], additionalProperties: { type: 'boolean' } }, false],
  ['object_nested', { type: 'object', properties: { outer: { type: 'object', properties: { inner: { type: 'object', properties: { v: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['v'], additionalProperties: false } }, required: ['inner'], additionalProperties: false } }, required: ['outer'], additionalProperties: false }, true],
  ['object_special_keys', { type: 'object', properties: { 'a"b': { type: 'boolean' }, 'ü': { type: 'null' }, 'sp ace': { const: 1 } }, required: ['a"b', 'ü', 'sp ace'], additionalProperties: false }, true],
  ['array_int', { type: 'array', items: { type: 'integer', minimum: 0, maximum: 999 }, minItems: 1, maxItems: 4 }, true],
  ['array_strings', { type: 'array', items: { type: 'string', maxLength: 3 }, maxItems: 3 }, true],
  ['array_exact', { type: 'array', items: { type: 'boolean' }, minItems: 2, maxItems: 2 }, true],
  ['array_prefix_closed', { type: 'array', prefixItems: [str({ maxLength: 3 }), { type: 'integer', minimum: 0, maximum: 5 }], items: false }, true],
  ['array_prefix_rest', { type: 'array', prefixItems: [{ type: 'boolean' }, { type: 'null' }], items: { type: 'integer', minimum: -5, maximum: 5 }, minItems: 3, maxItems: 5 }, true],
  ['array_prefix_min', { type: 'array', prefixItems: [{ type: 'boolean' }, { type: 'boolean' }, { type: 'null' }], items: false, minItems: 2 }, true],
  ['array_any_items', { type: 'array', maxItems: 2 }, false],
  ['array_nested', { type: 'array', items: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, maxItems: 3 }, maxItems: 3 }, true],
  ['pattern_anchored', { type: 'string', pattern: '^[A-Z]{2}[0-9]{3}$' }, true],
  ['pattern_phone', { type: 'string', pattern: '^\\d{3}-\\d{4}$' }, true],
  ['pattern_alternation', { type: 'string', pattern: '^(foo|bar)+$' }, true],
  ['pattern_negated_class', { type: 'string', pattern: '^[^a-z]{1,5}$' }, true],
  ['pattern_unanchored', { type: 'string', pattern: 'ab+c' }, false],
  ['pattern_optional_groups', { type: 'string', pattern: '^(?:v[0-9])?(x|yz){2,3}$' }, true],
  ['pattern_dot_escape', { type: 'string', pattern: '^a.\\.b$' }, true],
  ['anyOf_scalar', { anyOf: [{ type: 'string', maxLength: 5 }, { type: 'integer', minimum: 0, maximum: 9 }] }, true],
  ['oneOf_tagged', { oneOf: [
    { type: 'object', properties: { kind: { const: 'a' }, v: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['kind', 'v'], additionalProperties: false },
    { type: 'object', properties: { kind: { const: 'b' }, w: { type: 'boolean' } }, required: ['kind', 'w'], additionalProperties: false }] }, true],
  ['anyOf_with_base', { type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'null' } }, anyOf: [{ required: ['a'] }, { required: ['b'] }] }, true],
  ['allOf_objects', { allOf: [
    { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 3 } }, required: ['a'] },
    { type: 'object', properties: { b: { type: 'boolean' } }, required: ['b'] }] }, true],
  ['allOf_ref', { $defs: { base: { type: 'object', properties: { id: { type: 'integer', minimum: 1, maximum: 5 } }, required: ['id'] } },
    allOf: [{ $ref: '#/$defs/base' }, { properties: { tag: { enum: ['x', 'y'] } }, required: ['tag'] }] }, true],
  ['ref_defs', { $defs: { flag: { type: 'boolean' } }, type: 'object', properties: { f: { $ref: '#/$defs/flag' }, g: { $ref: '#/$defs/flag' } }, required: ['f', 'g'], additionalProperties: false }, true],
  ['ref_definitions', { definitions: { small: { type: 'integer', minimum: 0, maximum: 3 } }, type: 'array', items: { $ref: '#/definitions/small' }, maxItems: 3 }, true],
  ['ref_recursive_tree', { $defs: { node: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 }, kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['v'], additionalProperties: false } }, $ref: '#/$defs/node' }, false],
  ['ref_recursive_list', { $defs: { cell: { type: 'object', properties: { head: { type: 'boolean' }, tail: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/cell' }] } }, required: ['head', 'tail'], additionalProperties: false } }, $ref: '#/$defs/cell' }, false],
  ['true_schema', true, false],
  ['empty_schema', {}, false],
  ['tool_call_like', { type: 'object', properties: { name: { const: 'get_weather' }, arguments: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1, maximum: 14 } }, required: ['city', 'unit'], additionalProperties: false } }, required: ['name', 'arguments'], additionalProperties: false }, true],
  ['type_inferred', { properties: { a: { minimum: 0, maximum: 5, type: 'integer' } }, required: ['a'], additionalProperties: false }, true],
  ['enum_with_type', { type: ['string', 'null'], enum: ['a', 1, null, 'b c', true] }, true],
  ['object_false_property', { type: 'object', properties: { a: { type: 'boolean' }, never: false }, required: ['a'] }, true],
  ['multi_type_keywords', { type: ['object', 'array', 'number'], properties: { q: { type: 'null' } }, required: ['q'], additionalProperties: false, items: { type: 'boolean' }, maxItems: 2, minimum: 1, maximum: 2 }, true],
];

const errors = [
  ['err_format', { type: 'string', format: 'email' }, "'format'"],
  ['err_min_gt_max_len', { type: 'string', minLength: 5, maxLength: 2 }, 'minLength'],
  ['err_min_gt_max', { type: 'integer', minimum: 5, maximum: 3 }, 'minimum'],
  ['err_missing_ref', { $ref: '#/$defs/missing' }, '$ref'],
  ['err_unknown_type', { type: 'foo' }, 'foo'],
  ['err_unique_items', { type: 'array', uniqueItems: true }, 'uniqueItems'],
  ['err_backreference', { type: 'string', pattern: '(a)\\1' }, 'backreference'],
  ['err_false_schema', false, 'false schema'],
  ['err_required_forbidden', { type: 'object', properties: { a: { type: 'null' } }, required: ['b'], additionalProperties: false }, "'b'"],
  ['err_min_items', { type: 'array', minItems: 4, maxItems: 1 }, 'minItems'],
  ['err_self_ref', { $ref: '#' }, 'unsatisfiable'],
  ['err_allof_types', { allOf: [{ type: 'string' }, { type: 'integer' }] }, 'type'],
];

const regexes = [
  ['re_date', '[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'],
  ['re_words', '(hello|hi) (world|there)!?'],
  ['re_hex', '0x[0-9a-fA-F]{1,8}'],
  ['re_unicode_class', '[α-ω]{2,5}'],
  ['re_digits_opt', '-?\\d{1,6}(\\.\\d{1,2})?'],
  ['re_email_like', '[a-z]{1,8}@[a-z]{1,8}\\.(com|org)'],
];

const choices = [
  ['choice_yes_no', ['yes', 'no']],
  ['choice_sentences', ['The answer is 42.', 'I do not know', 'Überraschung', 'no']],
];

// GBNF grammars with an equivalent regular expression written independently.
const gbnf = [
  ['gbnf_list', 'root ::= "[" item ("," item)* "]"\nitem ::= [0-9] | "x"', /^\[(?:[0-9]|x)(?:,(?:[0-9]|x))*\]$/],
  ['gbnf_greeting', 'root ::= greet " " name  # comment\ngreet ::= "hi" | "hello"\nname ::= [A-Z] [a-z]{1,5}', /^(?:hi|hello) [A-Z][a-z]{1,5}$/],
  ['gbnf_nested', 'root ::= "(" inner? ")"\ninner ::= "a" | root', /^(\((?:a|\((?:a|\((?:a|\(\))?\))?\))?\))$/],
];

const cases = [];
for (const [name, schema] of schemas) cases.push({ name, kind: 'json_schema', source: schema, seeds: SEEDS });
for (const [name, schema] of errors) cases.push({ name, kind: 'json_schema', source: schema, seeds: 1 });
cases.push({ name: 'json_object', kind: 'json_object', source: '', seeds: SEEDS });
for (const [name, re] of regexes) cases.push({ name, kind: 'regex', source: re, seeds: SEEDS });
for (const [name, list] of choices) cases.push({ name, kind: 'choices', source: list, seeds: SEEDS });
for (const [name, g] of gbnf) cases.push({ name, kind: 'gbnf', source: g, seeds: SEEDS });

const dir = mkdtempSync(join(tmpdir(), 'qs-walks-'));
const casesPath = join(dir, 'cases.json');
writeFileSync(casesPath, JSON.stringify(cases));
const run = spawnSync(walkBin, [tokenizerDir, casesPath], { encoding: 'utf8', maxBuffer: 1 << 28 });
if (run.status !== 0) {
  console.error(run.stderr);
  console.error(`walker exited with ${run.status}`);
  process.exit(1);
}
const walks = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
const byName = new Map();
for (const w of walks) {
  if (!byName.has(w.name)) byName.set(w.name, []);
  byName.get(w.name).push(w);
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
let failures = 0;
let checked = 0;
const fail = (msg) => { failures++; console.error('FAIL ' + msg); };

function checkWalks(name, bounded, check) {
  const ws = byName.get(name) || [];
  if (ws.length === 0) return fail(`${name}: no walks`);
  if (ws[0].error) return fail(`${name}: compile error: ${ws[0].error}`);
  let finished = 0;
  for (const w of ws) {
    if (!w.valid_utf8) fail(`${name} seed ${w.seed}: invalid UTF-8`);
    if (!w.finished) continue;
    finished++;
    checked++;
    const problem = check(w.text);
    if (problem) fail(`${name} seed ${w.seed}: ${JSON.stringify(w.text)}: ${problem}`);
  }
  if (bounded && finished < 0.95 * ws.length) fail(`${name}: only ${finished}/${ws.length} walks finished within 256 tokens`);
  console.log(`${name}: ${finished}/${ws.length} finished` + (ws[0] ? ` e.g. ${JSON.stringify(ws.find((w) => w.finished)?.text ?? '')}` : ''));
}

for (const [name, schema, bounded] of schemas) {
  const validate = ajv.compile(schema);
  checkWalks(name, bounded, (text) => {
    let value;
    try { value = JSON.parse(text); } catch (e) { return 'not JSON: ' + e.message; }
    if (JSON.stringify(value) !== text && !/[eE.]/.test(text)) {
      // compact output: no whitespace outside strings
      if (/[\s]/.test(text.replace(/"(?:[^"\\]|\\.)*"/g, ''))) return 'not compact';
    }
    return validate(value) ? null : ajv.errorsText(validate.errors);
  });
}
checkWalks('json_object', false, (text) => {
  let v;
  try { v = JSON.parse(text); } catch (e) { return 'not JSON'; }
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? null : 'not an object';
});
for (const [name, re] of regexes) {
  const rx = new RegExp('^(?:' + re + ')$', 'u');
  checkWalks(name, true, (text) => (rx.test(text) ? null : `does not match /${re}/`));
}
for (const [name, list] of choices) checkWalks(name, true, (text) => (list.includes(text) ? null : 'not a choice'));
for (const [name, , rx] of gbnf) checkWalks(name, true, (text) => (rx.test(text) ? null : `does not match ${rx}`));
for (const [name, , needle] of errors) {
  const ws = byName.get(name) || [];
  if (!ws.length || !ws[0].error) fail(`${name}: compiled, expected an error containing ${needle}`);
  else if (!ws[0].error.includes(needle)) fail(`${name}: error '${ws[0].error}' does not contain '${needle}'`);
  else console.log(`${name}: ${ws[0].error}`);
}
console.log(`${schemas.length} schemas, ${checked} finished outputs checked, ${failures} failures`);
process.exit(failures ? 1 : 0);
