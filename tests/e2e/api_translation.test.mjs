// End-to-end tests of POST /v1/responses (OpenAI Responses API) and POST /v1/messages (Anthropic
// Messages API) through the official `openai` and `@anthropic-ai/sdk` clients, on the tiny
// random-weight test model. References: each stream's event order is checked against the order the
// API references document; the SDKs' own stream accumulators rebuild the final object; a
// Responses / Messages request must render the same prompt (same input token count) and, at
// temperature 0, produce the same text as the equivalent /v1/chat/completions request.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/api_translation.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { createParser } from 'eventsource-parser';
import { startServer, makeTinyModel, cleanWorkDir } from './server_harness.mjs';

const SERVED = 'tiny-api';
const API_KEY = 'sk-api-secret';
let server;
let openai;
let anthropic;

const WEATHER_TOOL_SCHEMA = {
  type: 'object', properties: { city: { type: 'string' } }, required: ['city'],
};

before(async () => {
  await makeTinyModel();
  server = await startServer(['--served-model-name', SERVED, '--api-key', API_KEY, '--no-output-guard']);
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 60_000 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: API_KEY, maxRetries: 0, timeout: 60_000 });
});

after(async () => {
  if (server && !server.exit) await server.stop();
  cleanWorkDir();
});

const auth = { Authorization: `Bearer ${API_KEY}` };

/** The equivalent chat completion (temperature 0) of a conversation. */
async function chatReference(body) {
  const res = await server.post('/v1/chat/completions', { temperature: 0, ...body }, { headers: auth });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Raw SSE of a POST: [{event, data (parsed JSON)}]; checks each event name equals data.type. */
async function rawEvents(route, body, headers) {
  const res = await server.post(route, body, { headers });
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const events = [];
  const parser = createParser({ onEvent: (ev) => events.push({ event: ev.event, data: JSON.parse(ev.data) }) });
  parser.feed(res.text);
  for (const e of events) assert.equal(e.event, e.data.type, 'the SSE event name is the payload type');
  return events;
}

// ---- Responses ----------------------------------------------------------------------------------

/**
 * The Responses streaming order (API reference, "Streaming events"): response.created,
 * response.in_progress, then per output item: output_item.added, for a message
 * content_part.added, output_text.delta*, output_text.done, content_part.done, for a function
 * call function_call_arguments.delta*, function_call_arguments.done, then output_item.done;
 * finally response.completed or response.incomplete. sequence_number counts from 0.
 */
function checkResponsesOrder(events) {
  const types = events.map((e) => e.type);
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `sequence_number of event ${i}`));
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  let i = 2;
  let outputIndex = 0;
  while (types[i] === 'response.output_item.added') {
    const item = events[i].item;
    assert.equal(events[i].output_index, outputIndex);
    i++;
    if (item.type === 'message') {
      assert.equal(types[i++], 'response.content_part.added');
      let text = '';
      while (types[i] === 'response.output_text.delta') text += events[i++].delta;
      assert.equal(types[i], 'response.output_text.done');
      assert.equal(events[i++].text, text, 'output_text.done has the deltas joined');
      assert.equal(types[i++], 'response.content_part.done');
    } else {
      assert.equal(item.type, 'function_call');
      let args = '';
      while (types[i] === 'response.function_call_arguments.delta') args += events[i++].delta;
      assert.equal(types[i], 'response.function_call_arguments.done');
      assert.equal(events[i++].arguments, args);
    }
    assert.equal(types[i], 'response.output_item.done');
    assert.equal(events[i++].output_index, outputIndex++);
  }
  assert.ok(outputIndex >= 1, 'at least one output item');
  assert.ok(['response.completed', 'response.incomplete'].includes(types[i]), `final event, got ${types[i]}`);
  assert.equal(i, types.length - 1, 'nothing after the final event');
  return events[i].response;
}

const RESPONSES_INPUT = [
  { role: 'user', content: [{ type: 'input_text', text: 'Name three colours.' }] },
];

test('responses.create: text answer equals the chat completion of the same conversation', async () => {
  const r = await openai.responses.create({
    model: SERVED, instructions: 'Be terse.', input: RESPONSES_INPUT, max_output_tokens: 12, temperature: 0,
    metadata: { trace: 'x' }, store: false, user: 'someone', truncation: 'disabled',
  });
  const ref = await chatReference({
    messages: [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'Name three colours.' }], max_tokens: 12,
  });
  assert.equal(r.object, 'response');
  assert.equal(r.model, SERVED);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output_text, ref.choices[0].message.content, 'SDK output_text = chat content');
  assert.equal(r.usage.input_tokens, ref.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, ref.usage.completion_tokens);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.status, ref.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.output[0].status, r.status, 'the one message item ends as the response does');
});

test('responses.create stream: documented event order, final response matches the deltas', async () => {
  const stream = await openai.responses.create({
    model: SERVED, input: 'Hello there', max_output_tokens: 10, temperature: 0, stream: true,
  });
  const events = [];
  for await (const e of stream) events.push(e);
  const final = checkResponsesOrder(events);
  const nonStream = await openai.responses.create({ model: SERVED, input: 'Hello there', max_output_tokens: 10, temperature: 0 });
  assert.equal(final.output[0].content[0].text, nonStream.output_text, 'stream and non-stream agree at temperature 0');
  assert.equal(final.usage.output_tokens, nonStream.usage.output_tokens);
  assert.equal(final.usage.input_tokens, nonStream.usage.input_tokens);
  const raw = await rawEvents('/v1/responses', { input: 'Hello there', max_output_tokens: 3, stream: true }, auth);
  checkResponsesOrder(raw.map((e) => e.data));
});

test('responses: function tool round trip renders like the chat completion with tool messages', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: WEATHER_TOOL_SCHEMA }];
  const first = await openai.responses.create({ model: SERVED, input: 'Weather in Paris?', tools, max_output_tokens: 8, temperature: 0 });
  // The random model rarely calls a tool: replay a call as a client would from its history.
  const call = first.output.find((o) => o.type === 'function_call') ??
      { type: 'function_call', call_id: 'call_e2e1', name: 'get_weather', arguments: '{"city":"Paris"}' };
  const second = await openai.responses.create({
    model: SERVED, tools, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' },
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }],
  });
  const ref = await chatReference({
    max_tokens: 8,
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: WEATHER_TOOL_SCHEMA } }],
    messages: [{ role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
      { role: 'tool', tool_call_id: call.call_id, content: 'sunny, 21 C' }],
  });
  assert.equal(second.usage.input_tokens, ref.usage.prompt_tokens, 'same prompt as the chat request');
  const refCalls = ref.choices[0].message.tool_calls ?? [];
  assert.equal(second.output.filter((o) => o.type === 'function_call').length, refCalls.length);
  if (refCalls.length === 0) assert.equal(second.output_text, ref.choices[0].message.content ?? '');
});

test('responses: previous_response_id and wrong types are 400 in the OpenAI error shape; unknown fields ignored', async () => {
  const prev = await server.post('/v1/responses', { input: 'x', previous_response_id: 'resp_1' }, { headers: auth });
  assert.equal(prev.status, 400);
  assert.equal(prev.json.error.param, 'previous_response_id');
  assert.equal(prev.json.error.type, 'invalid_request_error');
  for (const [body, param] of [
    [{ input: 'x', max_output_tokens: 'ten' }, 'max_output_tokens'],
    [{ input: 'x', temperature: 'hot' }, 'temperature'],
    [{ input: 7 }, 'input'],
    [{ input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ input: 'x', tools: [{ type: 'file_search' }] }, 'tools[0].type'],
    // Found in the chat messages the input becomes: named by the input item, not a chat field.
    [{ instructions: 'i', input: [{ type: 'function_call_output', call_id: 'c1', output: 'x' }] }, 'input[0]'],
  ]) {
    const res = await server.post('/v1/responses', body, { headers: auth });
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(res.json.error.param, param);
    assert.equal(typeof res.json.error.message, 'string');
  }
  await assert.rejects(openai.responses.create({ model: SERVED, input: 'x', previous_response_id: 'resp_1' }),
    (e) => e instanceof OpenAI.BadRequestError);
  const ok = await server.post('/v1/responses', { input: 'x', max_output_tokens: 2, reasoning: { effort: 'low' }, include: [], whatever: 1 }, { headers: auth });
  assert.equal(ok.status, 200, ok.text);
});

// ---- Anthropic Messages -------------------------------------------------------------------------

/**
 * The Messages streaming order (API reference, "Streaming Messages"): message_start; then per
 * content block (indices 0, 1, ...) content_block_start, content_block_delta*, content_block_stop;
 * then message_delta and message_stop; ping events may appear anywhere after message_start.
 */
function checkMessagesOrder(events) {
  const e = events.filter((x) => x.type !== 'ping');
  assert.equal(events[0].type, 'message_start');
  let i = 1;
  let index = 0;
  while (e[i].type === 'content_block_start') {
    assert.equal(e[i].index, index);
    const kind = e[i++].content_block.type;
    while (e[i].type === 'content_block_delta') {
      assert.equal(e[i].index, index);
      assert.equal(e[i++].delta.type, kind === 'text' ? 'text_delta' : 'input_json_delta');
    }
    assert.equal(e[i].type, 'content_block_stop');
    assert.equal(e[i++].index, index++);
  }
  assert.ok(index >= 1, 'at least one content block');
  assert.deepEqual(e.slice(i).map((x) => x.type), ['message_delta', 'message_stop']);
  assert.ok(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'].includes(e[i].delta.stop_reason));
  return e[i];
}

test('messages.create: text answer equals the chat completion; stream follows the documented order', async () => {
  const body = { model: SERVED, max_tokens: 12, temperature: 0, system: 'Be terse.', metadata: { user_id: 'u' },
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three colours.', cache_control: { type: 'ephemeral' } }] }] };
  const m = await anthropic.messages.create(body);
  const ref = await chatReference({ messages: [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'Name three colours.' }], max_tokens: 12 });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.content[0].text, ref.choices[0].message.content);
  // Anthropic's split: input_tokens + cache_creation_input_tokens + cache_read_input_tokens is the
  // whole prompt (the prompt caching docs); the chat reference ran the same prompt first.
  assert.equal(m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens,
               ref.usage.prompt_tokens);
  assert.equal(m.usage.output_tokens, ref.usage.completion_tokens);
  assert.equal(m.stop_reason, ref.choices[0].finish_reason === 'length' ? 'max_tokens' : 'end_turn');

  const events = [];
  for await (const ev of await anthropic.messages.create({ ...body, stream: true })) events.push(ev);
  const delta = checkMessagesOrder(events);
  assert.equal(delta.usage.output_tokens, m.usage.output_tokens);
  const text = events.filter((x) => x.type === 'content_block_delta').map((x) => x.delta.text).join('');
  assert.equal(text, m.content[0].text, 'stream and non-stream agree at temperature 0');
  // The SDK's accumulator rebuilds the same message from the stream.
  const final = await anthropic.messages.stream(body).finalMessage();
  assert.deepEqual(final.content, m.content);
  assert.equal(final.stop_reason, m.stop_reason);
  checkMessagesOrder((await rawEvents('/v1/messages', { ...body, stream: true, max_tokens: 3 }, { 'x-api-key': API_KEY })).map((x) => x.data));
});

test('messages: max_tokens and stop_sequences give their stop reasons', async () => {
  const cut = await anthropic.messages.create({ model: SERVED, max_tokens: 3, temperature: 0, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(cut.usage.output_tokens, 3);
  assert.equal(cut.stop_reason, 'max_tokens');
  // Stop at a piece of the greedy continuation: the reply ends right before it.
  const full = await anthropic.messages.create({ model: SERVED, max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Hi' }] });
  const text = full.content[0].text;
  const stop = [...text.slice(2)].slice(0, 2).join('');
  if (stop.trim().length > 0) {
    const stopped = await anthropic.messages.create({ model: SERVED, max_tokens: 16, temperature: 0, stop_sequences: [stop], messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(stopped.stop_reason, 'stop_sequence');
    assert.equal(stopped.stop_sequence, stop);
    assert.equal(stopped.content[0].text, text.slice(0, text.indexOf(stop)));
  }
});

test('messages: tool_use / tool_result round trip renders like the chat request; tools and tool_choice accepted', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: WEATHER_TOOL_SCHEMA }];
  for (const tool_choice of [{ type: 'auto' }, { type: 'none' }]) {
    const r = await anthropic.messages.create({ model: SERVED, max_tokens: 4, tools, tool_choice, messages: [{ role: 'user', content: 'Weather?' }] });
    assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(r.stop_reason));
  }
  const m = await anthropic.messages.create({
    model: SERVED, max_tokens: 8, temperature: 0, tools,
    messages: [{ role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny, 21 C' }] }],
  });
  const ref = await chatReference({
    max_tokens: 8,
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: WEATHER_TOOL_SCHEMA } }],
    messages: [{ role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny, 21 C' }],
  });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens, 'same prompt as the chat request');
  const events = [];
  for await (const ev of await anthropic.messages.create({ model: SERVED, max_tokens: 4, tools, stream: true, messages: [{ role: 'user', content: 'Weather?' }] })) events.push(ev);
  checkMessagesOrder(events);
});

test('messages: a final assistant message is a prefill the reply continues (Anthropic\'s rule)', async () => {
  const messages = [{ role: 'user', content: 'Name a colour.' }, { role: 'assistant', content: 'My favourite colour is' }];
  const m = await anthropic.messages.create({ model: SERVED, max_tokens: 6, temperature: 0, messages });
  // The reference: the chat route continuing the same final message (vLLM's continue_final_message).
  const ref = await chatReference({ max_tokens: 6, messages, add_generation_prompt: false, continue_final_message: true });
  assert.equal(m.content[0]?.text ?? '', ref.choices[0].message.content ?? '');
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens);
  const count = await anthropic.messages.countTokens({ model: SERVED, messages });
  assert.equal(count.input_tokens, ref.usage.prompt_tokens);
  // The prompt ends inside the assistant turn: fewer tokens than the same turn closed and a new
  // one opened (the chat route rendering it as history).
  const closed = await chatReference({ max_tokens: 1, messages });
  assert.ok(ref.usage.prompt_tokens < closed.usage.prompt_tokens, `${ref.usage.prompt_tokens} vs ${closed.usage.prompt_tokens}`);
  // An empty final assistant message is no prefill (Anthropic allows it): the prompt of the user
  // turn alone, not a finished empty reply followed by a new turn.
  const without = await anthropic.messages.countTokens({ model: SERVED, messages: [messages[0]] });
  for (const empty of ['', [], [{ type: 'text', text: '' }]]) {
    const c = await anthropic.messages.countTokens({ model: SERVED, messages: [messages[0], { role: 'assistant', content: empty }] });
    assert.equal(c.input_tokens, without.input_tokens, JSON.stringify(empty));
  }
  // Anthropic refuses a prefill that ends in whitespace.
  const bad = await server.post('/v1/messages', { max_tokens: 4, messages: [messages[0], { role: 'assistant', content: 'Well, ' }] },
                                { headers: auth });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.json.type, 'error');
  assert.match(bad.json.error.message, /trailing whitespace/);
});

test('messages: errors in Anthropic shape with the right statuses; x-api-key; unknown fields ignored', async () => {
  const ok = { model: SERVED, max_tokens: 2, messages: [{ role: 'user', content: 'x' }] };
  for (const [body, status] of [
    [{ model: SERVED, messages: [{ role: 'user', content: 'x' }] }, 400],  // max_tokens is required
    [{ ...ok, max_tokens: 'two' }, 400],
    [{ ...ok, temperature: 'warm' }, 400],
    [{ ...ok, messages: 'x' }, 400],
    [{ ...ok, tool_choice: { type: 'tool' } }, 400],
    [{ ...ok, model: 'no-such-model' }, 404],
  ]) {
    const res = await server.post('/v1/messages', body, { headers: { 'x-api-key': API_KEY } });
    assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
    assert.equal(res.json.type, 'error');
    assert.equal(res.json.error.type, status === 404 ? 'not_found_error' : 'invalid_request_error');
    assert.equal(typeof res.json.error.message, 'string');
  }
  const noKey = await server.post('/v1/messages', ok);
  assert.equal(noKey.status, 401);
  assert.equal(noKey.json.error.type, 'authentication_error');
  // A tool_result answering no tool_use is found in the chat messages the body becomes; the error
  // names the Messages message (index 0, not the chat index 1 after the system message).
  const orphan = await server.post('/v1/messages', { ...ok, system: 's',
    messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'x' }] }] },
  { headers: { 'x-api-key': API_KEY } });
  assert.equal(orphan.status, 400, orphan.text);
  assert.match(orphan.json.error.message, /^messages\[0\] /);
  const badJson = await server.request('POST', '/v1/messages', { rawBody: '{', headers: { 'x-api-key': API_KEY, 'Content-Type': 'application/json' } });
  assert.equal(badJson.status, 400);
  assert.equal(badJson.json.type, 'error');
  await assert.rejects(anthropic.messages.create({ ...ok, max_tokens: -1 }), (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
  const extra = await server.post('/v1/messages', { ...ok, thinking: { type: 'disabled' }, service_tier: 'auto', container: null, mcp_servers: [] },
    { headers: { 'x-api-key': API_KEY } });
  assert.equal(extra.status, 200, extra.text);
  assert.equal(extra.json.type, 'message');
});

test('messages.countTokens: input_tokens equals what messages.create bills for the same body; errors in Anthropic shape', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: WEATHER_TOOL_SCHEMA }];
  for (const body of [
    { model: SERVED, system: 'Be terse.', messages: [{ role: 'user', content: 'Name three colours.' }] },
    { model: SERVED, tools, tool_choice: { type: 'auto' },
      messages: [{ role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny, 21 C' }] }] },
  ]) {
    const count = await anthropic.messages.countTokens(body);
    assert.deepEqual(Object.keys(count), ['input_tokens']);
    const m = await anthropic.messages.create({ ...body, max_tokens: 1 });
    const u = m.usage;
    assert.equal(count.input_tokens, u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens, JSON.stringify(body));
    // The same body again reads its prompt from the prefix cache: input_tokens leaves those out.
    const again = (await anthropic.messages.create({ ...body, max_tokens: 1 })).usage;
    assert.ok(again.cache_read_input_tokens > 0, JSON.stringify(again));
    assert.equal(again.input_tokens + again.cache_read_input_tokens, count.input_tokens, JSON.stringify(again));
    // Streamed: the SDK's final message takes message_delta's split.
    const streamed = await anthropic.messages.stream({ ...body, max_tokens: 1 }).finalMessage();
    assert.equal(streamed.usage.input_tokens + streamed.usage.cache_read_input_tokens, count.input_tokens, JSON.stringify(streamed.usage));
    assert.ok(streamed.usage.cache_read_input_tokens > 0, JSON.stringify(streamed.usage));
  }
  const h = { headers: { 'x-api-key': API_KEY } };
  for (const [body, status, type] of [
    [{ model: SERVED }, 400, 'invalid_request_error'],  // messages is required
    [{ model: SERVED, messages: [{ role: 'user', content: 7 }] }, 400, 'invalid_request_error'],
    [{ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }, 404, 'not_found_error'],
    [[1, 2], 400, 'invalid_request_error'],
  ]) {
    const res = await server.post('/v1/messages/count_tokens', body, h);
    assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
    assert.equal(res.json.type, 'error');
    assert.equal(res.json.error.type, type);
  }
  assert.equal((await server.post('/v1/messages/count_tokens', { model: SERVED, messages: [{ role: 'user', content: 'x' }] })).status, 401);
  // Other paths under /v1/messages/ answer in Anthropic's shape too.
  const unknown = await server.post('/v1/messages/no_such_route', {}, h);
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.type, 'not_found_error');
  const wrongMethod = await server.request('GET', '/v1/messages/count_tokens', h);
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.json.type, 'error');
});
