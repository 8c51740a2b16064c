/**
 * The repository's Dockerfile read with dockerfile-ast (the parser of VS Code's Docker tooling), so tests can ask
 * what an image target is made of: its stages from the base up, and the ENV, USER, CMD and the like it ends with.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DockerfileParser, type Env, type From, type Instruction, type JSONInstruction, type Label } from 'dockerfile-ast';
import { repoRoot } from './harness.js';

/** Path of the Dockerfile of every image. */
export const dockerfilePath = join(repoRoot, 'Dockerfile');

/** One build stage: its `FROM` and the instructions up to the next `FROM`. */
export interface Stage {
  from: From;
  /** The stage name (`AS <name>`), or null. */
  name: string | null;
  instructions: Instruction[];
}

/** The stages of the Dockerfile, in order. */
export function dockerfileStages(): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of DockerfileParser.parse(readFileSync(dockerfilePath, 'utf8')).getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = instruction as From;
      stages.push({ from, name: from.getBuildStage(), instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

/**
 * The stages an image target is built from, base first: the target's stage and each stage named by a `FROM`
 * above it (a `FROM` of an outside image ends the chain).
 * @throws Error when no stage is named `target`.
 */
export function stageChain(target: string): Stage[] {
  const stages = dockerfileStages();
  const chain: Stage[] = [];
  let name: string | null = target;
  while (name !== null) {
    const stage = stages.find((s) => s.name === name);
    if (stage === undefined) {
      if (chain.length === 0) throw new Error(`the Dockerfile has no stage named ${target}`);
      break;
    }
    chain.unshift(stage);
    name = stage.from.getImageName();
  }
  return chain;
}

/** The instructions of a target's chain with `keyword`, base first. */
export function chainInstructions(target: string, keyword: string): Instruction[] {
  return stageChain(target).flatMap((stage) => stage.instructions.filter((i) => i.getKeyword() === keyword));
}

/** The environment a target's image sets (`ENV`, later ones winning). */
export function imageEnv(target: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const instruction of chainInstructions(target, 'ENV')) {
    for (const property of (instruction as Env).getProperties()) env[property.getName()] = property.getValue() ?? '';
  }
  return env;
}

/** The labels a target's image carries (`LABEL`, later ones winning; values as written, `${ARG}` unexpanded). */
export function imageLabels(target: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const instruction of chainInstructions(target, 'LABEL')) {
    for (const property of (instruction as Label).getProperties()) labels[property.getName()] = property.getValue() ?? '';
  }
  return labels;
}

/** The exec-form strings of the last `keyword` (CMD, ENTRYPOINT) of a target's chain; undefined when none. */
export function lastExecForm(target: string, keyword: 'CMD' | 'ENTRYPOINT'): string[] | undefined {
  const last = chainInstructions(target, keyword).at(-1) as JSONInstruction | undefined;
  return last?.getJSONStrings().map((s) => s.getJSONValue());
}
