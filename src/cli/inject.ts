import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import { injectorSettings } from '../injector/settings.ts';
import { loadConfig } from '../config/load.ts';
import { options, type Config, type OptionName } from '../config/options.ts';
import { NO_ENV, injectOptions, type InjectConfig } from '../config/person-options.ts';
import { loadTable } from '../config/resolve.ts';
import { OutriggerError, errorMessage, isOutriggerError } from '../shared/errors.ts';
import { PERSON_HELP, addTable } from './option-table.ts';

/**
 * The options that shape an injected pod, as flags of `outrigger inject` and `outrigger webhook`,
 * straight from the one table. They set mesh-wide defaults; a pod's annotations still win.
 */
const shaping = (Object.keys(options) as OptionName[]).filter(
  (n) => n !== 'inject' && (options[n].scope === 'inject' || n === 'capture'),
);

export function addInjectionOptions(cmd: Command, extra: OptionName[] = []): Command {
  addTable(cmd, options, [...shaping, ...extra]);
  return cmd;
}

/** Flags (commander keys are the option names) over OUTRIGGER_* env over defaults, validated by the shared loader. */
export function injectionDefaults(opts: Record<string, unknown>): Config {
  const flags: Partial<Record<OptionName, string>> = {};
  for (const name of Object.keys(options) as OptionName[])
    if (typeof opts[name] === 'string') flags[name] = opts[name];
  return loadConfig({ flags, env: process.env });
}

/**
 * The same rows for a person running `inject`, and the sidecar's ports, which go into the pod it
 * prints (HTTP_PROXY, the capture rules, the probes): flags only, so a variable left exported in a
 * shell never changes what inject prints (the webhook, a pod, reads the variables too).
 */
const injectRows: OptionName[] = [...shaping, 'egressPort', 'ingressPort', 'adminPort'];
const personShaping = Object.fromEntries(
  injectRows.map((n) => [n, { ...options[n], env: NO_ENV }]),
) as Record<OptionName, (typeof options)[OptionName]>;

const MANIFEST_FILE = /\.(ya?ml|json)$/;

/** -f's arguments as files: '-' is stdin, a directory is its .yaml/.yml/.json files in name order (kubectl -f DIR). */
async function expandInputs(args: string[]): Promise<string[]> {
  const files: string[] = [];
  for (const arg of args) {
    if (arg === '-') {
      files.push(arg);
      continue;
    }
    let isDir: boolean;
    try {
      isDir = (await stat(arg)).isDirectory();
    } catch (e) {
      throw new OutriggerError('source_invalid', `-f ${arg}: cannot read it (${errorMessage(e)})`);
    }
    if (!isDir) {
      files.push(arg);
      continue;
    }
    const inDir = (await readdir(arg)).filter((n) => MANIFEST_FILE.test(n)).sort();
    if (inDir.length === 0)
      throw new OutriggerError('source_invalid', `-f ${arg}: the directory has no .yaml, .yml or .json file`);
    files.push(...inDir.map((n) => join(arg, n)));
  }
  return files;
}

async function readInput(file: string): Promise<string> {
  if (file !== '-') return readFile(file, 'utf8');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** `outrigger inject -f FILE`: the webhook's mutation, offline, YAML in and YAML out. */
export function injectCommand(): Command {
  const cmd = new Command('inject').description(
    'inject the sidecar into the pod templates of Kubernetes manifests (YAML, multi-document)',
  );
  const readOwn = addTable(cmd, injectOptions);
  const readShape = addTable(cmd, personShaping, injectRows);
  cmd.addHelpText('after', PERSON_HELP);
  return cmd.action(async (opts: Record<string, unknown>) => {
    const flags = loadTable<keyof typeof injectOptions, InjectConfig>(injectOptions, readOwn(opts));
    if (flags.filename.length === 0)
      throw new OutriggerError(
        'config_invalid',
        "flag --filename (-f) is required: manifest files or directories of them, '-' for stdin",
      );
    const settings = injectorSettings(loadConfig(readShape(opts)));
    // Loaded on use: every sidecar runs this CLI, and only `inject` needs the YAML parser.
    const { injectManifests } = await import('../injector/manifests.ts');
    const labels: Record<string, string> = flags.podSecurity
      ? { 'pod-security.kubernetes.io/enforce': flags.podSecurity }
      : {};
    const outputs: string[] = [];
    for (const file of await expandInputs(flags.filename)) {
      const text = await readInput(file);
      const name = file === '-' ? '(stdin)' : file;
      let result: ReturnType<typeof injectManifests>;
      try {
        result = injectManifests(text, { settings, namespace: flags.namespace, namespaceLabels: labels });
      } catch (e) {
        if (isOutriggerError(e, 'config_invalid'))
          throw new OutriggerError('config_invalid', `${name}: ${e.message}`, { cause: e });
        throw e;
      }
      const { output, notes } = result;
      for (const n of notes) process.stderr.write(`${name}: ${n}\n`);
      outputs.push(output);
    }
    process.stdout.write(outputs.filter((o) => o !== '').join('---\n'));
  });
}
