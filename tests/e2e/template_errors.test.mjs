// End-to-end: a conversation the chat template rejects is a 400 whose JSON names the message and
// field (issue 13 item 6), not only a template line. The server runs with --chat-template set to a
// Mistral / Llama-2 style template that raises on broken role alternation; messages the Qwen3
// template could not render as meant (tool-call arguments that are not a JSON object, a tool
// result that answers no tool call, reasoning_content that is not a string) are rejected before
// rendering with the same kind of param.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/template_errors.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, makeTinyModel, cleanWorkDir, workDir } from './server_harness.mjs';

const ALTERNATING = "{%- for message in messages %}" +
  "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

let server;

before(async () => {
  await makeTinyModel();
  const file = path.join(workDir(), 'alternating.jinja');
  fs.writeFileSync(file, ALTERNATING);
  server = await startServer(['--served-model-name', 'x', '--chat-template', file]);
});

after(async () => {
  if (server && !server.exit) await server.stop();
  cleanWorkDir();
});

const user = (content) => ({ role: 'user', content });
const assistant = (content) => ({ role: 'assistant', content });

async function expect400(messages, param, mention) {
  const r = await server.post('/v1/chat/completions', { model: 'x', messages, max_tokens: 2 });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.error.type, 'invalid_request_error');
  assert.equal(r.json.error.param, param, r.text);
  assert.ok(r.json.error.message.includes(param), `message names ${param}: ${r.json.error.message}`);
  if (mention) assert.ok(r.json.error.message.includes(mention), r.json.error.message);
}

test('a template raise_exception on role order names the message: messages[i].role', async () => {
  const ok = await server.post('/v1/chat/completions',
    { model: 'x', messages: [user('a'), assistant('b'), user('c')], max_tokens: 2 });
  assert.equal(ok.status, 200, ok.text);
  await expect400([user('a'), assistant('b'), assistant('c'), user('d')], 'messages[2].role',
    'Conversation roles must alternate');
  await expect400([user('a'), user('b')], 'messages[1].role', 'Conversation roles must alternate');
  // /tokenize renders the same way.
  const t = await server.post('/tokenize', { model: 'x', messages: [assistant('a')] });
  assert.equal(t.status, 400, t.text);
  assert.equal(t.json.error.param, 'messages[0].role');
});

test('messages the chat template cannot render as meant are 400s naming the field', async () => {
  const call = (fn) => ({ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: fn }] });
  await expect400([user('a'), call({ name: 'f', arguments: '{"city": "Par' })],
    'messages[1].tool_calls[0].function.arguments');
  await expect400([user('a'), call({ name: 'f', arguments: '"Paris"' })], 'messages[1].tool_calls[0].function.arguments');
  await expect400([user('a'), call({ arguments: '{}' })], 'messages[1].tool_calls[0].function.name');
  await expect400([user('a'), { role: 'tool', tool_call_id: 'c1', content: 'r' }], 'messages[1].role');
  await expect400([user('a'), { role: 'assistant', content: 'b', reasoning_content: { x: 1 } }], 'messages[1].reasoning_content');
});
