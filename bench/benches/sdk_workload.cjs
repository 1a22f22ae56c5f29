// The TypeScript SDK's side of bench/benches/compare_sdk.py: runs a workload file
// through @anthropic-ai/sdk's BetaLocalFilesystemMemoryTool and prints the
// time spent per category as JSON.
//
//   npm install --prefix bench/benches/.node @anthropic-ai/sdk
//   NODE_PATH=bench/benches/.node/node_modules node bench/benches/sdk_workload.cjs WORKLOAD BASE
const fs = require('fs');
const { BetaLocalFilesystemMemoryTool } = require('@anthropic-ai/sdk/tools/memory/node');

async function main() {
  const [workload, base] = process.argv.slice(2);
  const steps = fs.readFileSync(workload, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const tool = await BetaLocalFilesystemMemoryTool.init(base);
  const spent = {};
  for (const { category, input } of steps) {
    const start = process.hrtime.bigint();
    let error = 0;
    try {
      await tool[input.command](input);
    } catch (e) {
      error = 1;
    }
    const took = Number(process.hrtime.bigint() - start) / 1e9;
    const s = (spent[category] ??= { seconds: 0, ops: 0, errors: 0 });
    s.seconds += took;
    s.ops += 1;
    s.errors += error;
  }
  console.log(JSON.stringify(spent));
}

main();
