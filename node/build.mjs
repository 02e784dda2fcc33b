// Builds the addon from this checkout and puts it where index.js loads it: `cargo build -p
// strata-node` (the dev profile, which reuses what the Rust tests compiled; `--release` for an
// optimized one), then the cdylib copied to strata.node. Plain cargo: nothing else to install.
import { execFileSync } from "node:child_process";
import { copyFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const release = process.argv.includes("--release");
const cargo = process.env.CARGO || "cargo";
execFileSync(cargo, ["build", "-p", "strata-node", ...(release ? ["--release"] : [])], {
  cwd: here,
  stdio: "inherit",
});
const target = resolve(here, process.env.CARGO_TARGET_DIR || join("..", "target"));
const library = { darwin: "libstrata_node.dylib", win32: "strata_node.dll" }[process.platform] || "libstrata_node.so";
copyFileSync(join(target, release ? "release" : "debug", library), join(here, "strata.node"));
console.log(`built ${join(here, "strata.node")}`);
