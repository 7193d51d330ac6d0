import { UsageError, adaptersHelp, exitCodes, mainHelp, parseAdaptersArguments, parseRunArguments, runHelp } from './arguments.js';

const helps: Record<string, string> = { run: runHelp, adapters: adaptersHelp };

/** The whole CLI: dispatches `argv` (without node and the script) and resolves with the exit code. */
export async function main(argv: string[], signal: AbortSignal): Promise<number> {
  const env = process.env;
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h') {
      process.stdout.write(mainHelp);
      return command === undefined ? exitCodes.usage : exitCodes.succeeded;
    }
    if (command === 'help') {
      const topic = rest[0];
      if (topic !== undefined && !(topic in helps)) throw new UsageError(`no command "${topic}"`);
      process.stdout.write(topic ? helps[topic]! : mainHelp);
      return exitCodes.succeeded;
    }
    if (command === 'run') {
      const parsed = parseRunArguments(rest);
      if (parsed.help) {
        process.stdout.write(runHelp);
        return exitCodes.succeeded;
      }
      // Loaded only now: the engine and the adapters take a while to load, help and usage errors need neither.
      const { runCommand } = await import('./run-command.js');
      return await runCommand(parsed.run, { env, cwd: process.cwd(), stdout: process.stdout, stderr: process.stderr, signal });
    }
    if (command === 'adapters') {
      const parsed = parseAdaptersArguments(rest);
      if (parsed.help) {
        process.stdout.write(adaptersHelp);
        return exitCodes.succeeded;
      }
      const [{ adapterRows, formatAdapters }, { discoverLocalAdapters }] = await Promise.all([
        import('./adapters-command.js'),
        import('./local-adapters.js'),
      ]);
      const rows = adapterRows(await discoverLocalAdapters(env));
      process.stdout.write(parsed.json ? `${JSON.stringify(rows, null, 2)}\n` : formatAdapters(rows));
      return exitCodes.succeeded;
    }
    throw new UsageError(command.startsWith('-') ? `unknown option "${command}" before a command` : `unknown command "${command}"`);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const help = error.command ? `actor ${error.command} --help` : 'actor --help';
    process.stderr.write(`actor: ${error.message}\nRun '${help}' for usage.\n`);
    return exitCodes.usage;
  }
}

/**
 * Ctrl-C (SIGINT) or SIGTERM aborts the run through the engine's signal: the adapter is stopped,
 * what ran is settled, the rest released, working copies removed, and the exit code is 130. A
 * second one quits at once.
 */
function interruptible(): AbortSignal {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(exitCodes.cancelled);
    process.stderr.write(`\nactor: ${name}: cancelling the run (again to quit at once)\n`);
    controller.abort(new Error(`cancelled by ${name}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return controller.signal;
}

main(process.argv.slice(2), interruptible()).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // A message, not a stack: what a user can act on (a folder that cannot be written, ...).
    process.stderr.write(`actor: unexpected error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = exitCodes.failed;
  },
);
