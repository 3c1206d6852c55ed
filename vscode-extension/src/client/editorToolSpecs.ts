/** The tools the VS Code extension runs in the editor and declares in `initialize`. */

import { type ToolSpec } from './protocol';

export const EDITOR_TOOL_SPECS: ToolSpec[] = [
  {
    name: 'editor_selection',
    description:
      "The user's current selection in the active VS Code editor: file path, language, the " +
      'selected line range, and the selected text (or, when nothing is selected, the line ' +
      'under the cursor).',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    kind: 'read',
    needsPermission: false,
  },
  {
    name: 'open_editors',
    description:
      'The files open in VS Code editor tabs, with which one is active and which have unsaved ' +
      'changes.',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    kind: 'read',
    needsPermission: false,
  },
  {
    name: 'diagnostics',
    description:
      "Problems (errors, warnings) VS Code's language services report, for one file or for " +
      'the whole workspace. Each line: path:line:column severity source: message.',
    inputSchema: {
      type: 'object',
      properties: {
        path: {
          type: 'string',
          description: 'A file path (absolute or relative to the workspace root); omit for all files.',
        },
        severity: {
          type: 'string',
          enum: ['error', 'warning', 'information', 'hint'],
          description: 'The least severe level to include (default: warning).',
        },
      },
      additionalProperties: false,
    },
    kind: 'read',
    needsPermission: false,
  },
];
