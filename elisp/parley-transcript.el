;;; parley-transcript.el --- The transcript of a Parley chat buffer: its blocks  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The transcript's text and the parts of it that can still change:
;; blocks inserted at a marker where the transcript grows (the
;; streaming path, O(1) per chunk), the last one extended chunk by
;; chunk, revised or replaced in place; who speaks (the labels, the
;; turns' numbers); notices and errors on their own lines; foldable
;; sections (thoughts, tool calls) and the thoughts themselves; the
;; Markdown of an answer fontified as it streams; the end of a turn.
;;
;; What goes into the blocks is decided above: parley-messages.el
;; (answers, thoughts, prompts, notices, where a `session/update'
;; lands), parley-tool-calls.el (tool calls and edits),
;; parley-usage.el (the totals the header line shows).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-markdown)
(require 'parley-wire)

;;;; Customization

(defgroup parley nil
  "Chat with the Parley coding agent."
  :group 'tools
  :prefix "parley-")

(defcustom parley-fold-thoughts t
  "Non-nil means a thought section folds when the answer starts."
  :type 'boolean)

(defcustom parley-fontify-markdown t
  "Non-nil means answers are fontified as Markdown while they stream.
Each line is fontified when it is complete, a fenced code block with
its language's major mode once it is closed; see parley-markdown.el.
No package is needed."
  :type 'boolean)

;;;; Faces

(defface parley-user-header '((t :inherit font-lock-keyword-face :weight bold))
  "Face for the label before the user's prompt.")

(defface parley-user-text '((t :inherit font-lock-doc-face))
  "Face for the user's prompt in the transcript.")

(defface parley-agent-header '((t :inherit font-lock-function-name-face :weight bold))
  "Face for the label before the agent's answer.")

(defface parley-section-header '((t :inherit font-lock-comment-face :weight bold))
  "Face for the header of a thought section.")

(defface parley-thought '((t :inherit font-lock-comment-face))
  "Face for the agent's thoughts.")

(defface parley-error '((t :inherit error))
  "Face for errors, and notices of level `error', in the transcript.")

(defface parley-notice '((t :inherit shadow :slant italic))
  "Face for notices of level `info' in the transcript (a cancelled turn).")

(defface parley-warning '((t :inherit warning))
  "Face for notices of level `warning' (an answer cut off, a budget spent).")

;;;; Chat buffers

(defun parley--chat-buffers ()
  "Return the live Parley chat buffers."
  (cl-remove-if-not (lambda (b) (with-current-buffer b
                                  (derived-mode-p 'parley-chat-mode)))
                    (buffer-list)))

(defun parley--check-buffer ()
  "Signal an error unless this is a Parley chat buffer."
  (unless (derived-mode-p 'parley-chat-mode)
    (user-error "Not a Parley chat buffer")))

;;;; Buffer state

(defmacro parley--define-buffer-state (&rest variables)
  "Define each of VARIABLES, a list (NAME DOC), as a buffer-local variable.
Each is nil in a new buffer.  A chat buffer's state is declared as a
table of them, here and in the files that require this one."
  (declare (indent 0))
  `(progn ,@(mapcar (lambda (variable)
                      `(defvar-local ,(car variable) nil ,(cadr variable)))
                    variables)))

;;;; Transcript state

(parley--define-buffer-state
  (parley--output "Marker where the transcript grows: its end, just before the prompt.")
  (parley--start "Where the transcript starts, after the banner line.")
  (parley--title "The session's title, if the server set one.")
  (parley--cwd "The workspace root of this buffer's session: paths are shown relative to it.")
  (parley--blocks "Hash table of the blocks that can still change, keyed (KIND . ID).")
  (parley--tail "The block at the end of the transcript that streamed text extends.")
  (parley--open-thoughts "Thought blocks not folded yet.")
  (parley--role "Who the last thing in the transcript is from: `user', `agent' or nil."))

(cl-defstruct (parley--block (:constructor parley--block-create) (:copier nil))
  "A part of the transcript that can still change.
KIND is `message', `thought', `user' or `tool'; ID its id on the wire;
BEG and END markers around it.  A tool block also has TITLE, STATUS,
INPUT (rawInput), CONTENT (a list of ACP tool call content items),
RAW-OUTPUT, LOCATIONS (a list of plists with :path and :line),
SUPERSEDED (non-nil when the server ended the call because the model
did not make it) and EXPANDED.  A message block has MARKDOWN, the
state of its Markdown fontification (`parley-markdown-start'), while
it streams."
  kind id beg end title status input content raw-output locations superseded expanded
  markdown)

;;;; Writing the transcript

(defmacro parley--writing (&rest body)
  "Run BODY with the transcript writable and no undo recording.
Point is restored afterwards.  Undo entries of the input would point
to wrong places once text is added above it, so they are dropped."
  (declare (indent 0) (debug t))
  `(prog1 (let ((inhibit-read-only t)
                (buffer-undo-list t))
            (save-excursion ,@body))
     (when (consp buffer-undo-list)
       (setq buffer-undo-list nil))))

(defun parley--props (string &rest props)
  "Add PROPS to all of STRING, read-only included, and return it."
  (add-text-properties 0 (length string) (cons 'read-only (cons t props)) string)
  string)

(defun parley--emit (string)
  "Insert STRING at the end of the transcript; return its start position.
STRING carries its own properties.  This is the streaming path: it
costs the same however long the buffer is."
  (parley--writing
    (goto-char parley--output)
    (prog1 (point)
      (insert string))))

(defun parley--close-tail ()
  "End the block at the end of the transcript; start a new line."
  (when parley--tail
    (let ((b parley--tail))
      (setq parley--tail nil)
      (when (eq (parley--block-kind b) 'thought)
        (parley--finish-thought b))
      (parley--finish-markdown b)))
  (let ((end (marker-position parley--output)))
    (when (and (> end (point-min))
               (/= (char-before end) ?\n))
      (parley--emit (parley--props (string ?\n))))))

(defun parley--new-block (kind id &rest slots)
  "Start a block of KIND with ID at the end of the transcript and return it.
SLOTS are more slot values for `parley--block-create'."
  (parley--close-tail)
  (let* ((pos (marker-position parley--output))
         (block (apply #'parley--block-create
                       :kind kind :id id
                       :beg (copy-marker pos) :end (copy-marker pos)
                       slots)))
    (puthash (cons kind id) block parley--blocks)
    block))

(defun parley--append (block string)
  "Append STRING to BLOCK, which is at the end of the transcript."
  (parley--emit string)
  (set-marker (parley--block-end block) parley--output)
  (setq parley--tail block))

(defun parley--extend (block text)
  "Append TEXT to BLOCK, the tail, with the properties of BLOCK's last char.
The text joins the last text-property interval instead of adding
one per chunk, so a long answer costs the garbage collector nothing
more than a short one."
  (parley--writing
    (goto-char parley--output)
    (insert-and-inherit (substring-no-properties text)))
  (set-marker (parley--block-end block) parley--output))

(defun parley--replace (block string)
  "Replace the text of BLOCK with STRING, keeping markers around it right."
  (let ((beg (marker-position (parley--block-beg block)))
        (end (marker-position (parley--block-end block))))
    (parley--writing
      (if (= beg end)
          (progn (goto-char beg) (insert string)
                 (set-marker (parley--block-end block) (point)))
        ;; Insert after the old text, pushing every marker at its end
        ;; (the next block, the output marker) past the new text, then
        ;; delete the old text; markers at its start stay put.
        (goto-char end)
        (insert-before-markers string)
        (delete-region beg end)))))

(defvar-local parley--turn-count 0
  "How many turns the session has had: the number of the last one (from 1).
Each prompt's label in the transcript carries its turn's number as
the text property `parley-turn'.")

(defun parley--ensure-role (role)
  "Insert the label of ROLE (`user' or `agent') unless it is the last one."
  (unless (eq parley--role role)
    (parley--close-tail)
    (setq parley--role role)
    (parley--emit
     (apply #'parley--props (concat (if (> parley--output parley--start) "\n" "")
                                    (if (eq role 'user) "You" "Parley")
                                    "\n")
            'face (if (eq role 'user) 'parley-user-header 'parley-agent-header)
            (and (eq role 'user)
                 (list 'parley-turn (setq parley--turn-count (1+ parley--turn-count))))))))

(defun parley--renumber-last-turn (turn)
  "Make TURN, as the server counts, the number of the last prompt's turn."
  (unless (eql turn parley--turn-count)
    (setq parley--turn-count turn)
    (let ((end (if (get-text-property (1- parley--output) 'parley-turn)
                   parley--output
                 (previous-single-property-change parley--output 'parley-turn nil
                                                  parley--start))))
      (when (and end (> end parley--start))
        (let ((beg (previous-single-property-change end 'parley-turn nil parley--start)))
          (when (get-text-property beg 'parley-turn)
            (parley--writing (put-text-property beg end 'parley-turn turn))))))))

(defun parley--turn-at (pos)
  "Return the number of the turn whose text is at POS, or nil."
  (or (get-text-property pos 'parley-turn)
      (and (> pos parley--start) (get-text-property (1- pos) 'parley-turn))
      (let ((label (previous-single-property-change pos 'parley-turn nil parley--start)))
        (and label (> label parley--start)
             (get-text-property (1- label) 'parley-turn)))))

(defun parley--insert-notice (text &optional face)
  "Insert TEXT on its own line in FACE (default `parley-notice')."
  (parley--close-tail)
  (parley--emit (parley--props (concat text "\n") 'face (or face 'parley-notice))))

(defun parley--insert-error (text)
  "Insert the error TEXT in the transcript."
  (parley--insert-notice (concat "Error: " text) 'parley-error))

;;;; Sections: thoughts and tool calls

(defconst parley--arrow-open ?▾
  "The character before an unfolded section's header.")

(defconst parley--arrow-closed ?▸
  "The character before a folded section's header.")

(defun parley--set-folded (id folded &optional hbeg)
  "Fold (when FOLDED) or unfold the section ID; return non-nil if found.
HBEG is where its header starts, when known.  Sections are marked by
text properties: the header carries `parley-header' and the body
`parley-body', both ID."
  (let ((hbeg (or hbeg
                  (and (parley--block-p id)
                       (marker-position (parley--block-beg id)))
                  (text-property-any (point-min) parley--output 'parley-header id))))
    (when hbeg
      (let* ((bbeg (next-single-property-change hbeg 'parley-header nil parley--output))
             (bend (if (eq (get-text-property bbeg 'parley-body) id)
                       (next-single-property-change bbeg 'parley-body nil parley--output)
                     bbeg)))
        (parley--writing
          (when (< bbeg bend)
            (put-text-property bbeg bend 'invisible (and folded 'parley-hidden)))
          (let ((from (if folded parley--arrow-open parley--arrow-closed))
                (to (if folded parley--arrow-closed parley--arrow-open)))
            (when (eq (char-after hbeg) from)
              (subst-char-in-region hbeg (1+ hbeg) from to t))))
        (when (parley--block-p id)
          (setf (parley--block-expanded id) (not folded)))
        t))))

(defun parley--section-at (pos)
  "Return the id of the section whose header line POS is on, or nil.
POS may also be just after the section's body (the end of a folded
header line)."
  (or (get-text-property pos 'parley-header)
      (and (> pos (point-min))
           (or (get-text-property (1- pos) 'parley-header)
               (get-text-property (1- pos) 'parley-body)))))

(defun parley--section-start (id pos)
  "Return the start of the header of the section ID around POS, or nil.
POS is in the section's header or body, or just after it."
  (let ((pos (if (and (> pos (point-min))
                      (not (eq (get-text-property pos 'parley-header) id))
                      (not (eq (get-text-property pos 'parley-body) id)))
                 (1- pos)
               pos)))
    (when (eq (get-text-property pos 'parley-body) id)
      (setq pos (1- (previous-single-property-change (1+ pos) 'parley-body nil
                                                     (1+ (point-min))))))
    (when (eq (get-text-property pos 'parley-header) id)
      (previous-single-property-change (1+ pos) 'parley-header nil (point-min)))))

(defun parley-toggle-section (&optional pos)
  "Fold or unfold the thoughts or tool call whose header is at POS (point)."
  (interactive)
  (let* ((pos (or pos (point)))
         (id (parley--section-at pos))
         (hbeg (and id (parley--section-start id pos))))
    (unless hbeg (user-error "No section here"))
    (parley--set-folded id (not (eq (char-after hbeg) parley--arrow-closed)) hbeg)))

(defun parley-next-section ()
  "Move to the next thought or tool call header."
  (interactive)
  (let ((pos (next-single-property-change (point) 'parley-header nil parley--output)))
    (when (and pos (< pos parley--output) (not (get-text-property pos 'parley-header)))
      (setq pos (next-single-property-change pos 'parley-header nil parley--output)))
    (if (and pos (< pos parley--output))
        (goto-char pos)
      (user-error "No more sections"))))

(defun parley--start-thought (id)
  "Start a thought section with ID and return its block."
  (let ((block (parley--new-block 'thought id)))
    (parley--append block (parley--props (string parley--arrow-open ?\s)
                                         'parley-header block
                                         'face 'parley-section-header))
    (parley--append block (parley--props "Thinking" 'parley-header block
                                         'face 'parley-section-header))
    (parley--append block (parley--props (string ?\n) 'parley-body block
                                         'face 'parley-thought))
    (push block parley--open-thoughts)
    block))

(defun parley--finish-thought (block)
  "End the thought BLOCK with a visible newline after its body."
  (let ((end (marker-position (parley--block-end block))))
    (parley--writing
      (if (and (eq (char-before end) ?\n)
               (> end (1+ (next-single-property-change
                           (parley--block-beg block) 'parley-header nil end))))
          ;; The body ends in a newline: make that one the visible end.
          (remove-list-of-text-properties (1- end) end '(parley-body invisible))
        (goto-char end)
        (insert (parley--props (string ?\n)))
        (when (= end parley--output)
          (set-marker parley--output (point)))
        (set-marker (parley--block-end block) (point))))))

(defun parley--fold-thoughts ()
  "Fold the thoughts of this turn that are still open."
  (when parley--open-thoughts
    (let ((thoughts parley--open-thoughts))
      (setq parley--open-thoughts nil)
      (when (and parley--tail (memq parley--tail thoughts))
        (parley--close-tail))
      (when parley-fold-thoughts
        (dolist (block thoughts)
          (parley--set-folded block t))))))

;;;; The Markdown of an answer

(defun parley--start-markdown (block)
  "Start fontifying the Markdown of the message BLOCK, if answers are."
  (when parley-fontify-markdown
    (setf (parley--block-markdown block)
          (parley-markdown-start (parley--block-beg block)))))

(defun parley--advance-markdown (block text)
  "Fontify the lines of BLOCK that TEXT, just added, completed.
Only a chunk with a newline completes lines: the others cost nothing."
  (let ((state (parley--block-markdown block)))
    (when (and state (string-search "\n" text))
      (parley-markdown-advance state (parley--block-end block)))))

(defun parley--finish-markdown (block)
  "Fontify the rest of the message BLOCK, which is complete."
  (let ((state (parley--block-markdown block)))
    (when state
      (setf (parley--block-markdown block) nil)
      (parley-markdown-finish state (parley--block-end block)))))

;;;; Reading updates

(defun parley--content-text (content)
  "Return the text of a ContentBlock CONTENT."
  (pcase (plist-get content :type)
    ("text" (or (plist-get content :text) ""))
    ("resource" (let ((resource (plist-get content :resource)))
                  (format "[context: %s]\n" (or (plist-get resource :uri) "resource"))))
    ("resource_link" (format "[context: %s]\n" (plist-get content :uri)))
    (_ "")))

;;;; A turn's extent, and the last turn when it was cut off

(parley--define-buffer-state
  (parley--turn-start "Marker where the last prompt's turn starts (its label's line).")
  (parley--cut-off-turn
   "The last turn when it was cut off (cancelled, or its prompt answered
with an error), as a cons of markers (START . END) around it; else nil.
`parley-retry' removes it and asks the server to replace it."))

(defun parley--start-turn ()
  "Mark the end of the transcript as the start of a prompt's turn.
A turn cut off before is no longer the last one: it stays."
  (parley--forget-cut-off-turn)
  (parley--close-tail)
  (when parley--turn-start (set-marker parley--turn-start nil))
  (setq parley--turn-start (copy-marker parley--output)))

(defun parley--forget-cut-off-turn ()
  "Forget the cut-off turn: it is kept in the transcript as it is."
  (when parley--cut-off-turn
    (set-marker (car parley--cut-off-turn) nil)
    (set-marker (cdr parley--cut-off-turn) nil)
    (setq parley--cut-off-turn nil)))

(defun parley--end-turn-extent (cut-off)
  "Mark the end of the transcript as the end of the last prompt's turn.
CUT-OFF is non-nil when the turn was cut off.
Called once its last words (the stop notice, the error) are in: what
comes after them (a notice about the server) is not the turn's."
  (parley--forget-cut-off-turn)
  (when parley--turn-start
    (when cut-off
      (setq parley--cut-off-turn
            (cons (copy-marker parley--turn-start) (copy-marker parley--output))))
    (set-marker parley--turn-start nil)
    (setq parley--turn-start nil)))

(defun parley--remove-turn (turn)
  "Remove TURN, a cons of markers (START . END), from the transcript.
The turns are numbered as if it had never been: the next prompt takes
its number.  The prompt being typed is below the transcript, untouched."
  (let ((start (marker-position (car turn)))
        (end (marker-position (cdr turn))))
    (when (and start end (< start end))
      (let ((label (text-property-not-all start end 'parley-turn nil)))
        (when label
          (setq parley--turn-count (1- (get-text-property label 'parley-turn)))))
      (parley--writing (delete-region start end))
      (setq parley--role nil))))

;;;; The end of a turn

(defun parley--finish-blocks ()
  "Forget the blocks of the turn that ended; finish fontifying its answers."
  (parley--close-tail)
  (when parley--blocks
    (maphash (lambda (_key block) (parley--finish-markdown block)) parley--blocks)
    (maphash (lambda (_key block)
               (set-marker (parley--block-beg block) nil)
               (set-marker (parley--block-end block) nil))
             parley--blocks)
    (clrhash parley--blocks))
  (setq parley--tail nil
        parley--open-thoughts nil))

(provide 'parley-transcript)
;;; parley-transcript.el ends here
