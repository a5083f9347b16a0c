// One prompt + decode run through the engine and through the scalar reference forward: the logits after the prompt
// and after each decode token, for tests that compare runs bit for bit or within a tolerance.

/** runEngine(model) / runRef(ref) for a fixed prompt and decode tokens: arrays of Float32Array logits. */
export function logitRuns(prompt, decode) {
  return {
    runEngine(model) {
      const out = [];
      model.engine.forward(prompt, 0);
      out.push(model.engine.logits());
      decode.forEach((t, i) => { model.engine.forward([t], prompt.length + i); out.push(model.engine.logits()); });
      return out;
    },
    runRef(r) {
      const out = [];
      let last;
      prompt.forEach((t, i) => { last = r.step(t, i); });
      out.push(last);
      decode.forEach((t, i) => out.push(r.step(t, prompt.length + i)));
      return out;
    },
  };
}

/** Two runs with the same number of steps and the same float32 bits at every step. */
export const sameRunBits = (a, b) => a.length === b.length && a.every((x, s) => Buffer.from(x.buffer).equals(Buffer.from(b[s].buffer)));

/** Largest |a - b| over every step and logit. */
export function maxRunDiff(a, b) {
  let m = 0;
  for (let s = 0; s < a.length; s++) for (let i = 0; i < a[s].length; i++) m = Math.max(m, Math.abs(a[s][i] - b[s][i]));
  return m;
}
