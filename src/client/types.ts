/**
 * What the daemon answers, as the client library returns it. These mirror the views the
 * routes build (src/api/routes.ts, research-routes.ts); the research views are the contract's.
 */
import type { Receipt, TerminalNotification, DeliveryMode } from '../contracts/api.js';
import type { TaskOptions } from '../contracts/task-options.js';
import type { BgResult } from '../tasks/result-reader.js';
import type { TaskEvent } from '../store/port.js';
import type { ResearchCreateBody, ResearchDispatch, ResearchDocumentView, ResearchRunView, ResearchSnapshotView } from '../contracts/research.js';
import type { InvestigateToolInput, ResearchToolInput } from '../contracts/agent-tools.js';

export type { Receipt, TerminalNotification, DeliveryMode, TaskOptions, BgResult, TaskEvent };
export type { ResearchCreateBody, ResearchDispatch, ResearchDocumentView, ResearchRunView, ResearchSnapshotView };
export type { InvestigateToolInput, ResearchToolInput };

export interface TaskView {
  taskId: string;
  workflow: 'investigate' | 'research';
  state: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  repo: string;
  createdAt: string;
  updatedAt: string;
  error: { code: string; message: string; state: string } | null;
  resumeCount: number;
  /** The uid that submitted it over the socket (SO_PEERCRED); null when not recorded. */
  callerUid: number | null;
  /** The objective the task was submitted with (null when its input is unreadable). */
  objective: string | null;
  usage: unknown;
}

export interface WaitReply {
  /** False when the timeout passed first. */
  terminal: boolean;
  task: TaskView;
  notification: TerminalNotification | null;
  /** Completed: true when it read none of its declared sources or repository files (docs/behaviour.md#nothing-read). */
  nothingRead?: boolean;
}

export interface SubmitOptions {
  /** Absolute path of the repository (relative paths are resolved against the working directory). */
  repo: string;
  options?: TaskOptions;
}

export interface ResearchCreateReply {
  run: ResearchRunView;
  deduplicated: boolean;
  dispatch: ResearchDispatch;
}

/** One page of `GET /api/v1/research`: the workspace's runs, newest first. */
export interface ResearchRunList {
  runs: ResearchRunView[];
  limit: number;
  /** The `cursor` of the next page; null on the last one. */
  nextCursor: string | null;
}

export interface HealthReply {
  ok: boolean;
  version: string;
  startedAt: string;
  sandbox?: Record<string, unknown>;
}
