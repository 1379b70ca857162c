// Runs a model exported by tinyspec_webgpu.export in a browser through WebGPU: no dependencies, one ES module.
//
//   import { loadModel } from "./runner.js";
//   const model = await loadModel(new URL("./", import.meta.url));   // the folder holding model.json
//   const [probs] = await model.run([new Float32Array(...)]);        // one typed array per input, in order
//
// The manifest (model.json) lists the buffers, the kernels (one WGSL file each), and the steps: a kernel dispatched on
// some buffers, or a copy. Weights come from weights.safetensors. Every step of a run is recorded into one command encoder.

const TYPED = { bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array,
                uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, float16: Uint16Array, float32: Float32Array };

// safetensors: a little-endian u64 header length, a JSON header {name: {dtype, shape, data_offsets}}, then the data
export function parseSafetensors(bytes) {
  const view = new DataView(bytes);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, 8, n)));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    out[name] = { dtype: t.dtype, shape: t.shape, bytes: new Uint8Array(bytes.slice(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1])) };
  }
  return out;
}

function padded(bytes) {  // WebGPU writes whole 4-byte words
  if (bytes.byteLength % 4 === 0) return bytes;
  const out = new Uint8Array(bytes.byteLength + 4 - (bytes.byteLength % 4));
  out.set(bytes);
  return out;
}

export async function loadModel(base) {
  const fetchFrom = async (name) => { const r = await fetch(new URL(name, base)); if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`); return r; };
  const manifest = await (await fetchFrom("model.json")).json();
  if (!navigator.gpu) throw new Error("this browser has no WebGPU (navigator.gpu is undefined)");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("no WebGPU adapter");
  const missing = manifest.features.filter((f) => !adapter.features.has(f));
  if (missing.length) throw new Error(`the WebGPU adapter lacks ${missing.join(", ")}, which these kernels need`);
  const wanted = manifest.limits.maxStorageBuffersPerShaderStage;
  if (wanted > adapter.limits.maxStorageBuffersPerShaderStage)
    throw new Error(`a kernel binds ${wanted} storage buffers; this adapter allows ${adapter.limits.maxStorageBuffersPerShaderStage}`);
  const device = await adapter.requestDevice({ requiredFeatures: manifest.features,
    requiredLimits: { maxStorageBuffersPerShaderStage: Math.max(wanted, 8) } });
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const buffers = manifest.buffers.map((b) => device.createBuffer({ size: b.bytes, usage }));
  const weights = parseSafetensors(await (await fetchFrom("weights.safetensors")).arrayBuffer());
  manifest.buffers.forEach((b, i) => { if (b.role === "weight") device.queue.writeBuffer(buffers[i], 0, padded(weights[b.name].bytes)); });
  const pipelines = [];
  for (const k of manifest.kernels) {
    const module = device.createShaderModule({ code: await (await fetchFrom(k.file)).text() });
    const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
    if (errors.length) throw new Error(`${k.file}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")}`);
    pipelines.push(device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: k.name } }));
  }
  // the buffers never change: each step's bind group is made once
  const groups = manifest.steps.map((s) => s.kernel === undefined ? null : device.createBindGroup({
    layout: pipelines[s.kernel].getBindGroupLayout(0), entries: s.buffers.map((b, j) => ({ binding: j, resource: { buffer: buffers[b] } })) }));

  async function run(inputs) {
    manifest.inputs.forEach((spec, j) => device.queue.writeBuffer(buffers[spec.buffer], 0, padded(new Uint8Array(inputs[j].buffer, inputs[j].byteOffset, inputs[j].byteLength))));
    const encoder = device.createCommandEncoder();
    manifest.steps.forEach((s, i) => {
      if (s.copy) { encoder.copyBufferToBuffer(buffers[s.copy[1]], 0, buffers[s.copy[0]], 0, manifest.buffers[s.copy[0]].bytes); return; }
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipelines[s.kernel]);
      pass.setBindGroup(0, groups[i]);
      pass.dispatchWorkgroups(...s.dispatch);
      pass.end();
    });
    const staging = manifest.outputs.map((o) => {
      const size = manifest.buffers[o.buffer].bytes;
      const b = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      encoder.copyBufferToBuffer(buffers[o.buffer], 0, b, 0, size);
      return b;
    });
    device.queue.submit([encoder.finish()]);
    return Promise.all(manifest.outputs.map(async (o, j) => {
      await staging[j].mapAsync(GPUMapMode.READ);
      const Typed = TYPED[o.dtype], count = o.shape.reduce((a, b) => a * b, 1);
      const out = new Typed(staging[j].getMappedRange().slice(0, count * Typed.BYTES_PER_ELEMENT));
      staging[j].destroy();
      return out;
    }));
  }
  return { manifest, device, adapter, run };
}
