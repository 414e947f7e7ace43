import { INJECTION_LABEL } from '../config/options.ts';

/** One check's result; every warning and failure carries what to do. */
export type Outcome = 'pass' | 'warn' | 'fail';

export interface CheckResult {
  check: string;
  outcome: Outcome;
  message: string;
  /** What to do, for warnings and failures. */
  fix?: string;
}

export const OPTED_IN = `${INJECTION_LABEL}=enabled`;
export const REINSTALL = 'outrigger install | kubectl apply -f -';

/** Certificates (the webhook's, the mesh CA) warn this long before they expire. */
export const EXPIRY_WARN_MS = 14 * 86_400_000;

export const fail = (check: string, message: string, fix: string): CheckResult => ({
  check,
  outcome: 'fail',
  message,
  fix,
});
export const pass = (check: string, message: string): CheckResult => ({ check, outcome: 'pass', message });
export const warn = (check: string, message: string, fix: string): CheckResult => ({
  check,
  outcome: 'warn',
  message,
  fix,
});
