// End-to-end test of speculative decoding in `qwenserve serve` on the tiny random-weight model:
// n-gram prompt lookup (--spec-ngram / --speculative-config) and a draft model (--model-draft /
// --speculative-config {"model": ...}): greedy completions are identical with and without
// speculation, a repeating output accepts drafts, the tiny model drafting for itself accepts
// (nearly) all of them and another random model few, and the counters agree between /metrics,
// /stats and the JSON log lines; a --speculative-config naming an unsupported method, and a draft
// model with another vocabulary, stop the server at startup with a message.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/spec.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { startServer, makeTinyModel, cleanWorkDir, workDir, QS_BIN, REPO_ROOT, TOKENIZER_DIR } from './server_harness.mjs';

const execFileAsync = promisify(execFile);

/** Another tiny random-weight GGUF (`args`: extra qwenserve-make-test-model flags). */
async function makeOtherTinyModel(name, args) {
  const out = path.join(workDir(), name);
  await execFileAsync(process.env.QS_PYTHON || '/usr/bin/python3', [
    path.join(REPO_ROOT, 'tools', 'qwenserve-make-test-model'), '--config', 'tiny', '--format', 'gguf',
    '--dtype', 'f32', '--init-std', 'fan', '--tokenizer', TOKENIZER_DIR, '--out', out, ...args,
  ], { timeout: 120_000 });
  return out;
}

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

test('a draft model gives identical greedy completions; drafting for itself accepts nearly all drafts', async () => {
  const tiny = await makeTinyModel();
  const other = await makeOtherTinyModel('other.gguf', ['--seed', '2']);
  const common = ['--log-format', 'json', '--no-output-guard'];
  const [self, poor] = await Promise.all([
    startServer([...common, '--model-draft', tiny, '--draft-max', '4']),
    startServer([...common, '--speculative-config', JSON.stringify({ model: other, num_speculative_tokens: 3 })]),
  ]);
  try {
    const bodies = [
      completion('The quick brown fox jumps over the lazy dog. The quick brown fox'),
      completion('Once upon a time'),
      completion([9707, 1879, 9707, 1879, 9707, 1879]),
    ];
    for (const body of bodies) {
      const [a, b, c] = await Promise.all([plain, self, poor].map((s) => s.post('/v1/completions', body)));
      for (const r of [a, b, c]) assert.equal(r.status, 200, r.text);
      assert.equal(b.json.choices[0].text, a.json.choices[0].text, JSON.stringify(body.prompt));
      assert.equal(c.json.choices[0].text, a.json.choices[0].text, JSON.stringify(body.prompt));
      assert.equal(b.json.usage.completion_tokens, a.json.usage.completion_tokens);
      assert.equal(c.json.usage.completion_tokens, a.json.usage.completion_tokens);
    }
    for (const [server, check] of [[self, (rate) => rate >= 0.9], [poor, (rate) => rate <= 0.5]]) {
      const records = await server.waitForLogRecords(bodies.length);
      let drafts = 0;
      let accepted = 0;
      for (const r of records) {
        assert.equal(typeof r.spec_acceptance_rate, 'number', JSON.stringify(r));
        drafts += r.spec_draft_tokens;
        accepted += r.spec_accepted_tokens;
      }
      assert.ok(drafts > 0);
      assert.ok(check(accepted / drafts), `acceptance ${accepted}/${drafts}`);
      const m = (await server.metrics()).values;
      assert.equal(m.get('qwenserve_spec_draft_tokens_total'), drafts);
      assert.equal(m.get('qwenserve_spec_accepted_tokens_total'), accepted);
      const stats = (await server.get('/stats')).json;
      assert.equal(stats.speculative.draft_tokens, drafts);
      assert.equal(stats.speculative.accepted_tokens, accepted);
      assert.ok(stats.speculative.propose_steps > 0, JSON.stringify(stats.speculative));
      assert.ok(stats.speculative.propose_ms_per_step > 0, JSON.stringify(stats.speculative));
    }
  } finally {
    for (const s of [self, poor]) if (s && !s.exit) await s.stop();
  }
});

test('a draft model with another vocabulary stops the server, naming both files', async () => {
  const tiny = await makeTinyModel();
  const wide = await makeOtherTinyModel('wide-vocab.gguf', ['--seed', '1', '--vocab-size', '152064']);
  const r = spawnSync(QS_BIN, ['serve', '--model', tiny, '--port', '0', '--model-draft', wide],
    { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 1, r.stderr);
  assert.ok(r.stderr.includes(`the draft model ${wide} cannot draft for the target model ${tiny}`), r.stderr);
  assert.match(r.stderr, /vocabulary sizes \(logits rows\) differ: draft 152064, target 151936/);
});
