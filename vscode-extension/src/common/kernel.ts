/**
 * The session's kernel as the server's `kernel` config option says it (docs/protocol.md, "The
 * user's own kernel"): shared by the status bar and the chat view, which show the server's names.
 */

import type { ConfigOptionView } from './view';

/** The session's config option that says which kernel its Python tools use. */
export const KERNEL_OPTION = 'kernel';
/** The option's value for Parley's own kernel. */
export const OWN_KERNEL = 'parley';

/** The kernel option's current choice when it is the user's kernel: the option's and the choice's names, as the server sends them. */
export function attachedKernel(options: readonly ConfigOptionView[]): { option: string; name: string } | undefined {
  const option = options.find((o) => o.id === KERNEL_OPTION);
  if (!option || option.currentValue === OWN_KERNEL) {
    return undefined;
  }
  const choice = option.options.find((o) => o.value === option.currentValue);
  return { option: option.name, name: choice?.name ?? option.currentValue };
}
