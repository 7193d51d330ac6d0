/**
 * A process that makes one working copy and then waits to be killed: the orphan sweep test kills it
 * with SIGKILL, as a crash would, and checks that a later process removes what it left.
 * Arguments: <working-copy directory> <repository> <attempt id>. Prints the copy's path when ready.
 */
import { GitWorkspacePort } from '../git-workspace-port.js';

const [directory, repo, attemptId] = process.argv.slice(2);
const port = new GitWorkspacePort({ directory });
const workspace = await port.prepare(
  {
    id: 'tsk_holder',
    projectId: 'prj_holder',
    input: 'hold a working copy',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 0, perDayMicroUsd: 0 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: false },
    workspace: { repo: repo!, ref: '' },
  },
  attemptId!,
);
process.stdout.write(`${workspace.path}\n`);
setInterval(() => undefined, 60_000);
