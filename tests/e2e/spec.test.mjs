// End-to-end test of speculative decoding (n-gram prompt lookup) in `qwenserve serve` on the tiny
// random-weight model: greedy completions are identical with and without --spec-ngram, a
// repeating output accepts drafts, and the counters agree between /metrics, /stats and the JSON
// log lines; a --speculative-config naming an unsupported method stops the server at startup.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/spec.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startServer, makeTinyModel, cleanWorkDir, QS_BIN } from './server_harness.mjs';

let plain;
let spec;

before(async () => {
  await makeTinyModel();
  [plain, spec] = await Promise.all([
    // No output guard: the repeating output runs to max_tokens (the guard would end it in both).
    startServer(['--log-format', 'json', '--no-output-guard']),
    startServer(['--log-format', 'json', '--no-output-guard', '--speculative-config',
      '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3}']),
  ]);
});

after(async () => {
  for (const s of [plain, spec]) if (s && !s.exit) await s.stop();
  cleanWorkDir();
});

const completion = (prompt, extra = {}) => ({ model: 'qwenserve', prompt, max_tokens: 40, temperature: 0, ...extra });

test('greedy completions are identical with and without speculation', async () => {
  const bodies = [
    completion('The quick brown fox jumps over the lazy dog. The quick brown fox'),
    completion('1, 2, 3, 1, 2, 3, 1, 2,'),
    completion([9707, 1879, 9707, 1879, 9707, 1879]),
    // A strong bias on a prompt token: the output repeats it, and every draft is accepted.
    completion([9707, 9707, 9707, 9707], { logit_bias: { 9707: 100 } }),
  ];
  for (const body of bodies) {
    const [a, b] = await Promise.all([plain.post('/v1/completions', body), spec.post('/v1/completions', body)]);
    assert.equal(a.status, 200, a.text);
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.choices[0].text, a.json.choices[0].text, JSON.stringify(body.prompt));
    assert.equal(b.json.choices[0].finish_reason, a.json.choices[0].finish_reason);
    assert.equal(b.json.usage.completion_tokens, a.json.usage.completion_tokens);
  }
  const records = await spec.waitForLogRecords(bodies.length);
  const repeating = records.at(-1);
  assert.equal(repeating.spec_draft_tokens > 0, true, JSON.stringify(repeating));
  assert.equal(repeating.spec_acceptance_rate, 1, JSON.stringify(repeating));
  let drafts = 0;
  let accepted = 0;
  for (const r of records) {
    drafts += r.spec_draft_tokens;
    accepted += r.spec_accepted_tokens;
  }
  const m = (await spec.metrics()).values;
  assert.equal(m.get('qwenserve_spec_draft_tokens_total'), drafts);
  assert.equal(m.get('qwenserve_spec_accepted_tokens_total'), accepted);
  const stats = (await spec.get('/stats')).json;
  assert.equal(stats.speculative.draft_tokens, drafts);
  assert.equal(stats.speculative.accepted_tokens, accepted);
  const off = (await plain.metrics()).values;
  assert.equal(off.get('qwenserve_spec_draft_tokens_total'), 0);
  for (const r of await plain.waitForLogRecords(bodies.length)) assert.equal(r.spec_acceptance_rate, null);
});

test('an unsupported --speculative-config method stops the server with a message', async () => {
  const model = await makeTinyModel();
  const r = spawnSync(QS_BIN, ['serve', '--model', model, '--port', '0', '--speculative-config',
    '{"method":"eagle","num_speculative_tokens":2}'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /method 'eagle' is not supported/);
});
