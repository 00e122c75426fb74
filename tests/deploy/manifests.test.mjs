// Tests of the Kubernetes deployment files under deploy/ (no cluster needed):
//   - `kubectl kustomize` renders the base and every overlay (kubectl >= 1.27 with kustomize v5:
//     Debian's kubectl 1.20 lacks `components`, so an older or missing kubectl fails with a message);
//   - `yamllint --strict` passes on deploy/ and tests/deploy/;
//   - every rendered object validates against its schema: Kubernetes core kinds with npm
//     kubernetes-models, Gateway API / Prometheus Operator / KEDA kinds with the @kubernetes-models
//     packages, the InferencePool with a JSON schema written from its v1 CRD (ajv), the Endpoint
//     Picker configuration with a JSON schema written from the llm-d router's Go types;
//   - the pieces fit together: pool selector = pod labels, target port = container port, route ->
//     pool, EPP engine entry = the pods' engine label, probes, drain timing, CUDA resources,
//     PodMonitor / ScaledObject targets, PrometheusRule = deploy/monitoring/alerts.yaml;
//   - `promtool check rules` and `promtool test rules` (tests/deploy/alerts_test.yaml).
//
// Run: node --test tests/deploy/manifests.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import YAML from 'yaml';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import { PodMonitor, PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const DEPLOY = path.join(REPO, 'deploy');
const KUSTOMIZE = path.join(DEPLOY, 'kustomize');
const RENDERED = ['base', 'overlays/cpu', 'overlays/cuda'];

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
const readJson = (p) => JSON.parse(fs.readFileSync(p, 'utf8'));
const validatePool = ajv.compile(readJson(path.join(HERE, 'schemas', 'inferencepool-v1.schema.json')));
const validateEppConfig = ajv.compile(readJson(path.join(HERE, 'schemas', 'endpointpickerconfig.schema.json')));

/** Schema validation per apiVersion/kind: throws with the validator's message when invalid. */
const VALIDATORS = {
  'v1/Service': (o) => new Service(o).validate(),
  'v1/ConfigMap': (o) => new ConfigMap(o).validate(),
  'apps/v1/Deployment': (o) => new Deployment(o).validate(),
  'policy/v1/PodDisruptionBudget': (o) => new PodDisruptionBudget(o).validate(),
  'gateway.networking.k8s.io/v1/HTTPRoute': (o) => new HTTPRoute(o).validate(),
  'monitoring.coreos.com/v1/PodMonitor': (o) => new PodMonitor(o).validate(),
  'monitoring.coreos.com/v1/PrometheusRule': (o) => new PrometheusRule(o).validate(),
  'keda.sh/v1alpha1/ScaledObject': (o) => new ScaledObject(o).validate(),
  'inference.networking.k8s.io/v1/InferencePool': (o) => {
    if (!validatePool(o)) throw new Error(ajv.errorsText(validatePool.errors));
  },
};

/** kubectl's client version as [major, minor], or a failure naming what is needed. */
function kubectlVersion() {
  const res = spawnSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
  if (res.error || res.status !== 0) {
    assert.fail('kubectl not found: the deploy tests need kubectl >= 1.27 with kustomize v5 (`kubectl kustomize` '
      + 'with components); Debian\'s kubectl 1.20 is too old');
  }
  const info = JSON.parse(res.stdout);
  return { major: Number(info.clientVersion.major), minor: parseInt(info.clientVersion.minor, 10),
    kustomize: info.kustomizeVersion || '' };
}

const renders = new Map();
/** `kubectl kustomize <dir>` parsed into objects (cached per directory). */
function render(dir) {
  if (!renders.has(dir)) {
    const out = execFileSync('kubectl', ['kustomize', path.join(KUSTOMIZE, dir)], { encoding: 'utf8' });
    renders.set(dir, YAML.parseAllDocuments(out).map((d) => d.toJS()));
  }
  return renders.get(dir);
}
const find = (objects, kind, name) => objects.find((o) => o.kind === kind && (!name || o.metadata.name === name));

/** `--flag=value` / `--flag value` of a container's args (last one wins), or undefined. */
function argValue(args, flag) {
  let value;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) value = args[i + 1];
    else if (args[i].startsWith(`${flag}=`)) value = args[i].slice(flag.length + 1);
  }
  return value;
}

/** The qwenserve container of a rendered overlay. */
function servingContainer(objects) {
  const deployment = find(objects, 'Deployment', 'qwenserve');
  assert.ok(deployment, 'a Deployment named qwenserve');
  const container = deployment.spec.template.spec.containers.find((c) => c.name === 'qwenserve');
  assert.ok(container, 'a container named qwenserve');
  return { deployment, container };
}

test('kubectl is 1.27 or newer with kustomize v5', () => {
  const v = kubectlVersion();
  assert.ok(v.major > 1 || v.minor >= 27,
    `kubectl ${v.major}.${v.minor} is too old: the deploy tests need >= 1.27 (kustomize v5 with components)`);
  assert.match(v.kustomize, /^v5\./, `kubectl's kustomize is ${v.kustomize || 'unknown'}, need v5`);
});

test('kubectl kustomize renders the base and every overlay', () => {
  const overlays = fs.readdirSync(path.join(KUSTOMIZE, 'overlays')).map((d) => `overlays/${d}`);
  assert.deepEqual(overlays.sort(), RENDERED.filter((d) => d !== 'base').sort(), 'every overlay is tested');
  for (const dir of RENDERED) {
    const objects = render(dir);
    assert.ok(objects.length >= 3, `${dir} renders objects`);
  }
  const kinds = render('overlays/cpu').map((o) => o.kind).sort();
  assert.deepEqual(kinds, ['ConfigMap', 'Deployment', 'HTTPRoute', 'InferencePool', 'PodDisruptionBudget',
    'PodMonitor', 'PrometheusRule', 'ScaledObject', 'Service']);
});

test('yamllint --strict passes on deploy/ and tests/deploy/', () => {
  const res = spawnSync('yamllint', ['--strict', '-c', path.join(DEPLOY, '.yamllint.yaml'), DEPLOY, HERE],
    { encoding: 'utf8' });
  assert.ok(!res.error, 'yamllint not found (Debian package yamllint, installed by scripts/install-deps.sh)');
  assert.equal(res.status, 0, `yamllint:\n${res.stdout}${res.stderr}`);
});

test('every rendered object validates against its schema', () => {
  for (const dir of RENDERED) {
    for (const o of render(dir)) {
      const key = `${o.apiVersion}/${o.kind}`;
      assert.ok(VALIDATORS[key], `${dir}: no schema for ${key} (add one to this test)`);
      assert.doesNotThrow(() => VALIDATORS[key](o), `${dir}: ${key} ${o.metadata.name}`);
    }
  }
});

test('the schemas catch broken objects (they can fail)', () => {
  const pool = structuredClone(find(render('overlays/cpu'), 'InferencePool'));
  const broken = [
    (p) => { p.spec.targetPorts = []; },
    (p) => { p.spec.targetPorts = [{ number: 8000 }, { number: 8000 }]; },
    (p) => { delete p.spec.endpointPickerRef.port; },
    (p) => { p.spec.endpointPickerRef.failureMode = 'FailSoft'; },
    (p) => { p.spec.selector = { matchLabels: {} }; },
    (p) => { p.spec.targetPort = p.spec.targetPorts; },
  ];
  for (const breakIt of broken) {
    const copy = structuredClone(pool);
    breakIt(copy);
    assert.throws(() => VALIDATORS['inference.networking.k8s.io/v1/InferencePool'](copy), breakIt.toString());
  }
  const { deployment } = servingContainer(render('base'));
  const bad = structuredClone(deployment);
  bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
  assert.throws(() => VALIDATORS['apps/v1/Deployment'](bad));
  const epp = YAML.parse(find(render('overlays/cpu'), 'ConfigMap', 'qwenserve-epp-config').data['epp-config.yaml']);
  epp.plugins.find((p) => p.type === 'core-metrics-extractor').parameters.engineConfigs[0].kvUsageSpecs = 'x';
  assert.equal(validateEppConfig(epp), false, 'a misspelt engine field is an error');
});

test('Deployment: llm-d labels, probes, non-root, and drain timing that loses no admitted request', () => {
  for (const dir of RENDERED) {
    const { deployment, container } = servingContainer(render(dir));
    const pod = deployment.spec.template;
    assert.equal(pod.metadata.labels['app.kubernetes.io/name'], 'qwenserve', dir);
    assert.equal(pod.metadata.labels['llm-d.ai/engine-type'], 'qwenserve', dir);
    assert.equal(pod.metadata.labels['llm-d.ai/inference-serving'], 'true', dir);
    for (const [k, v] of Object.entries(deployment.spec.selector.matchLabels)) assert.equal(pod.metadata.labels[k], v);
    const port = container.ports.find((p) => p.name === 'http');
    assert.equal(Number(argValue(container.args, '--port')), port.containerPort, `${dir}: --port = container port`);
    assert.equal(argValue(container.args, '--host'), '0.0.0.0', `${dir}: listens on all addresses`);
    assert.equal(container.readinessProbe.httpGet.path, '/ready');
    assert.equal(container.livenessProbe.httpGet.path, '/health');
    assert.equal(container.startupProbe.httpGet.path, '/health');
    for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
      assert.equal(probe.httpGet.port, 'http');
    }
    const sleepCmd = container.lifecycle.preStop.exec.command;
    assert.equal(sleepCmd[0], '/bin/sleep');
    const preStop = Number(sleepCmd[1]);
    const grace = Number(argValue(container.args, '--shutdown-grace'));
    assert.ok(preStop >= 1 && grace > 0, `${dir}: preStop pause ${preStop} s, --shutdown-grace ${grace} s`);
    assert.ok(pod.spec.terminationGracePeriodSeconds >= preStop + grace + 10,
      `${dir}: terminationGracePeriodSeconds ${pod.spec.terminationGracePeriodSeconds} < preStop ${preStop} + `
      + `--shutdown-grace ${grace} + 10`);
    assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0, 'rolling updates keep capacity');
    assert.equal(pod.spec.securityContext.runAsNonRoot, true);
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
    const mount = container.volumeMounts.find((m) => m.name === 'models');
    assert.ok(argValue(container.args, '--model').startsWith(`${mount.mountPath}/`), 'the model is on the volume');
    const pdb = find(render(dir), 'PodDisruptionBudget');
    assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
    const svc = find(render(dir), 'Service', 'qwenserve');
    assert.equal(svc.spec.ports[0].targetPort, 'http');
  }
});

test('cuda overlay: the CUDA image, one NVIDIA GPU, the nvidia runtime class; cpu overlay: none', () => {
  const { deployment, container } = servingContainer(render('overlays/cuda'));
  assert.match(container.image, /:cuda$/);
  assert.equal(deployment.spec.template.spec.runtimeClassName, 'nvidia');
  assert.equal(String(container.resources.requests['nvidia.com/gpu']), '1');
  assert.equal(String(container.resources.limits['nvidia.com/gpu']), '1');
  const cpu = servingContainer(render('overlays/cpu'));
  assert.match(cpu.container.image, /:cpu$/);
  assert.equal(cpu.deployment.spec.template.spec.runtimeClassName, undefined);
  assert.equal(cpu.container.resources.limits['nvidia.com/gpu'], undefined);
});

test('inference gateway: pool -> qwenserve pods and port, route -> pool, EPP engine entry for qwenserve', () => {
  for (const dir of ['overlays/cpu', 'overlays/cuda']) {
    const objects = render(dir);
    const { deployment, container } = servingContainer(objects);
    const pool = find(objects, 'InferencePool', 'qwenserve');
    for (const [k, v] of Object.entries(pool.spec.selector.matchLabels)) {
      assert.equal(deployment.spec.template.metadata.labels[k], v, `${dir}: pool selector ${k}`);
    }
    assert.deepEqual(pool.spec.targetPorts.map((p) => p.number), [container.ports.find((p) => p.name === 'http').containerPort]);
    const route = find(objects, 'HTTPRoute', 'qwenserve');
    const refs = route.spec.rules.flatMap((r) => r.backendRefs);
    assert.ok(refs.length > 0);
    for (const ref of refs) {
      assert.deepEqual([ref.group, ref.kind, ref.name], ['inference.networking.k8s.io', 'InferencePool', pool.metadata.name]);
    }
    const cm = find(objects, 'ConfigMap', 'qwenserve-epp-config');
    const epp = YAML.parse(cm.data['epp-config.yaml']);
    assert.ok(validateEppConfig(epp), ajv.errorsText(validateEppConfig.errors));
    const declared = new Set(epp.plugins.map((p) => p.name || p.type));
    for (const profile of epp.schedulingProfiles) {
      for (const p of profile.plugins) assert.ok(declared.has(p.pluginRef), `pluginRef ${p.pluginRef} is declared`);
    }
    for (const source of epp.dataLayer.sources) {
      assert.ok(declared.has(source.pluginRef));
      for (const e of source.extractors) assert.ok(declared.has(e.pluginRef));
    }
    for (const scorer of ['queue-scorer', 'kv-cache-utilization-scorer', 'prefix-cache-scorer']) {
      assert.ok(epp.schedulingProfiles[0].plugins.some((p) => p.pluginRef === scorer), `${scorer} is scheduled`);
    }
    const extractor = epp.plugins.find((p) => p.type === 'core-metrics-extractor').parameters;
    const engineLabel = deployment.spec.template.metadata.labels[extractor.engineLabelKey];
    const engine = extractor.engineConfigs.find((e) => e.name === engineLabel);
    assert.ok(engine, `an engineConfigs entry for the pods' ${extractor.engineLabelKey}=${engineLabel}`);
    assert.ok(extractor.engineConfigs.some((e) => e.name === extractor.defaultEngine));
    for (const key of ['queuedRequestsSpec', 'runningRequestsSpec', 'kvUsageSpec', 'cacheInfoSpec']) {
      assert.match(engine[key], /^qwenserve_/, `${key} names a qwenserve family`);
    }
    // The flag form for EPPs without engineConfigs names the same families.
    const flags = Object.fromEntries(cm.data['epp-legacy-flags.txt'].trim().split('\n').map((l) => {
      const m = /^--([a-z-]+)=(.*)$/.exec(l);
      assert.ok(m, `flag line ${l}`);
      return [m[1], m[2]];
    }));
    assert.deepEqual(flags, {
      'total-queued-requests-metric': engine.queuedRequestsSpec,
      'total-running-requests-metric': engine.runningRequestsSpec,
      'kv-cache-usage-percentage-metric': engine.kvUsageSpec,
      'cache-info-metric': engine.cacheInfoSpec,
      'lora-info-metric': '',
    });
  }
});

test('monitoring and KEDA target the qwenserve pods and Deployment', () => {
  const objects = render('overlays/cpu');
  const { deployment, container } = servingContainer(objects);
  const monitor = find(objects, 'PodMonitor', 'qwenserve');
  for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) {
    assert.equal(deployment.spec.template.metadata.labels[k], v);
  }
  assert.ok(container.ports.some((p) => p.name === monitor.spec.podMetricsEndpoints[0].port));
  assert.equal(monitor.spec.podMetricsEndpoints[0].path, '/metrics');
  const scaled = find(objects, 'ScaledObject', 'qwenserve');
  assert.deepEqual([scaled.spec.scaleTargetRef.kind, scaled.spec.scaleTargetRef.name], ['Deployment', deployment.metadata.name]);
  const trigger = scaled.spec.triggers[0];
  assert.equal(trigger.type, 'prometheus');
  assert.match(trigger.metadata.query, /qwenserve_num_requests_waiting/);
  assert.match(trigger.metadata.query, new RegExp(`container="${container.name}"`));
});

test('the PrometheusRule is make-prometheusrule.sh output of deploy/monitoring/alerts.yaml', () => {
  const alerts = YAML.parse(fs.readFileSync(path.join(DEPLOY, 'monitoring', 'alerts.yaml'), 'utf8'));
  const rule = find(render('overlays/cpu'), 'PrometheusRule', 'qwenserve');
  assert.deepEqual(rule.spec, alerts, 'spec = the rules file');
  const committed = path.join(KUSTOMIZE, 'components', 'monitoring', 'prometheusrule.yaml');
  const fresh = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'qs-rule-')), 'rule.yaml');
  execFileSync(path.join(DEPLOY, 'monitoring', 'make-prometheusrule.sh'), [fresh]);
  assert.equal(fs.readFileSync(committed, 'utf8'), fs.readFileSync(fresh, 'utf8'),
    'prometheusrule.yaml is stale: run deploy/monitoring/make-prometheusrule.sh');
  fs.rmSync(path.dirname(fresh), { recursive: true, force: true });
});

test('promtool check rules and promtool test rules pass for every alert', () => {
  const rules = path.join(DEPLOY, 'monitoring', 'alerts.yaml');
  const check = spawnSync('promtool', ['check', 'rules', rules], { encoding: 'utf8' });
  assert.ok(!check.error, 'promtool not found (Debian package prometheus)');
  assert.equal(check.status, 0, check.stdout + check.stderr);
  const unit = spawnSync('promtool', ['test', 'rules', path.join(HERE, 'alerts_test.yaml')], { encoding: 'utf8' });
  assert.equal(unit.status, 0, unit.stdout + unit.stderr);
  // Every alert of the rules file has at least one test case that expects it to fire.
  const alertNames = YAML.parse(fs.readFileSync(rules, 'utf8')).groups.flatMap((g) => g.rules.map((r) => r.alert));
  const tests = YAML.parse(fs.readFileSync(path.join(HERE, 'alerts_test.yaml'), 'utf8')).tests;
  const firing = new Set(tests.flatMap((t) => (t.alert_rule_test || [])
    .filter((c) => (c.exp_alerts || []).length > 0).map((c) => c.alertname)));
  for (const name of alertNames) assert.ok(firing.has(name), `alerts_test.yaml has a firing case for ${name}`);
});
