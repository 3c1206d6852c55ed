;;; parley-transcript.el --- The transcript of a Parley chat buffer  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; What the server streams into a chat buffer, and how it is shown:
;; answers, thoughts and replayed prompts inserted at a marker (the
;; streaming path, O(1) per chunk), tool calls and thoughts as
;; foldable sections, notices and errors, and the usage the header
;; line shows.  `parley--update' is where a `session/update' lands.
;;
;; This file knows nothing of the server: parley-session.el routes
;; the updates here; parley-question.el asks permission questions in
;; the same transcript.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-diff)
(require 'parley-display)
(require 'parley-markdown)

(defvar parley--cwd)                    ; parley-session.el: the session's workspace

;;;; Customization

(defgroup parley nil
  "Chat with the Parley coding agent."
  :group 'tools
  :prefix "parley-")

(defcustom parley-fold-thoughts t
  "Non-nil means a thought section folds when the answer starts."
  :type 'boolean)

(defcustom parley-tool-display-limit 4000
  "Maximum characters of a tool's input or output shown in the buffer."
  :type 'integer)

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

(defface parley-tool-header '((t :inherit font-lock-constant-face))
  "Face for the header line of a tool call.")

(defface parley-tool-body '((t :inherit shadow))
  "Face for a tool call's input and output.")

(defface parley-status-pending '((t :inherit shadow))
  "Face for the status of a tool call not yet started.")

(defface parley-status-running '((t :inherit warning))
  "Face for the status of a running tool call.")

(defface parley-status-done '((t :inherit success))
  "Face for the status of a finished tool call.")

(defface parley-status-failed '((t :inherit error))
  "Face for the status of a failed tool call.")

(defface parley-tool-superseded '((t :inherit shadow))
  "Face for a tool call the model did not make after all (superseded).")

(defface parley-location '((t :inherit link))
  "Face for a file location of a tool call, a button that opens it.")

(defface parley-error '((t :inherit error))
  "Face for errors shown in the transcript.")

(defface parley-notice '((t :inherit shadow :slant italic))
  "Face for notices in the transcript (cancelled, turn statistics).")

(defface parley-warning '((t :inherit warning))
  "Face for warnings in the transcript (an answer cut off, a refusal).")

;;;; Chat buffers

(defun parley--chat-buffers ()
  "Return the live Parley chat buffers."
  (cl-remove-if-not (lambda (b) (with-current-buffer b
                                  (derived-mode-p 'parley-chat-mode)))
                    (buffer-list)))

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

;;;; JSON as text

(defvar json-false)
(defvar json-null)
(declare-function json-encode "json" (object))

(defun parley--json-encode (value)
  "Encode VALUE (a plist or vector from jsonrpc.el) as a JSON string.
Emacs 28 has `json-serialize' only when built with libjansson;
otherwise json.el does it, as it does for jsonrpc.el."
  (if (fboundp 'json-serialize)
      (json-serialize value :null-object nil :false-object :json-false)
    (require 'json)
    (let ((json-false :json-false)
          (json-null nil))
      (json-encode value))))

(defun parley--json-brief (value &optional limit)
  "Return VALUE (as jsonrpc.el parsed it) as compact text, at most LIMIT chars."
  (let ((text (if (stringp value)
                  value
                (condition-case nil
                    (parley--json-encode value)
                  (error (prin1-to-string value))))))
    (if (and limit (> (length text) limit))
        (concat (substring text 0 limit) "…")
      text)))

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

(defun parley--render-prompt (text context)
  "Show the prompt TEXT and the CONTEXT resources in the transcript."
  (setq parley--role nil)               ; every prompt gets its label
  (parley--ensure-role 'user)
  (dolist (block context)
    (parley--emit (parley--props (parley--content-text block) 'face 'parley-notice)))
  (unless (string-empty-p text)
    (parley--emit (parley--props (concat text "\n") 'face 'parley-user-text))))

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

(defun parley--status-label (status)
  "Return the label and face of the tool STATUS as a cons."
  (pcase status
    ("in_progress" '("running" . parley-status-running))
    ("completed" '("done" . parley-status-done))
    ("failed" '("failed" . parley-status-failed))
    (_ '("pending" . parley-status-pending))))

(defun parley--indent (text)
  "Return TEXT with each line indented by four spaces."
  (replace-regexp-in-string "^" "    " text))

(defun parley--limit (text)
  "Return TEXT cut to `parley-tool-display-limit' characters."
  (if (<= (length text) parley-tool-display-limit)
      text
    (format "%s\n… [%d more characters]"
            (substring text 0 parley-tool-display-limit)
            (- (length text) parley-tool-display-limit))))

(defun parley--input-string (title input &optional full)
  "Return the INPUT of the tool call TITLE as body lines, indented.
Code (docs/display.md, `parley-display-tool-input') is fontified in
its language; any other input is indented JSON.  It is cut to
`parley-tool-display-limit' characters unless FULL."
  (pcase-let ((`(,language . ,text) (parley-display-tool-input title input))
              (cut (if full #'identity #'parley--limit)))
    (if language
        (parley--props (parley--code-block (funcall cut text)
                                           (parley-markdown-mode-for language)))
      (parley--props (concat (parley--indent (funcall cut text)) "\n")
                     'face 'parley-tool-body))))

(defun parley--tool-body (block)
  "Return the body of the tool BLOCK's section: input, content and output.
Each part starts with a newline and does not end with one."
  (let* ((input (parley--block-input block))
         (final (or (parley--block-superseded block)
                    (member (parley--block-status block) '("completed" "failed"))))
         (content (mapconcat (lambda (item) (parley--content-item-string item input nil t))
                             (parley--block-content block) ""))
         (raw (parley--block-raw-output block))
         (part (lambda (label text)
                 (concat (parley--props (format "\n  %s:\n" label) 'face 'parley-tool-body)
                         (string-trim-right text "\n")))))
    (concat
     (if input
         (funcall part "input" (parley--input-string (parley--block-title block) input))
       "")
     (cond ((not (string-empty-p content))
            ;; Before the call ends, its content is what it is about
            ;; (the code, the diff); after, its result.
            (funcall part (if final "output" "content") content))
           ((and raw (not (parley--block-superseded block)))
            (funcall part "output" (parley--props (parley--indent (parley--limit (parley--json-brief raw)))
                                                  'face 'parley-tool-body)))
           (t "")))))

;;;; File locations

(defvar parley-location-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'parley-open-location)
    (define-key map [mouse-1] #'parley-open-location-click)
    (define-key map [mouse-2] #'parley-open-location-click)
    map)
  "Keymap on the file locations of a tool call.")

(defun parley--location-string (location)
  "Return the clickable text of the tool call LOCATION (:path, :line)."
  (let* ((path (plist-get location :path))
         (line (plist-get location :line))
         ;; A chat buffer's directory is its workspace root.
         (root (file-name-as-directory (expand-file-name default-directory)))
         (shown (if (and (file-name-absolute-p path) (string-prefix-p root path))
                    (substring path (length root))
                  path))
         (label (if (numberp line) (format "%s:%d" shown line) shown)))
    (propertize label
                'parley-location location 'face 'parley-location
                'mouse-face 'highlight 'follow-link t 'keymap parley-location-map
                'help-echo (format "RET or mouse-1: open %s" label))))

(defun parley--locations-string (block)
  "Return the line of the tool BLOCK's file locations, or the empty string."
  (let ((locations (cl-remove-if-not (lambda (l) (stringp (plist-get l :path)))
                                     (parley--block-locations block))))
    (if locations
        (concat "\n    " (mapconcat #'parley--location-string locations "  "))
      "")))

(defun parley-open-location (&optional pos)
  "Open the file of the tool call location at POS (point), at its line."
  (interactive)
  (let ((location (get-text-property (or pos (point)) 'parley-location)))
    (unless location (user-error "No file location here"))
    (let ((file (expand-file-name (plist-get location :path)))
          (line (plist-get location :line)))
      (pop-to-buffer (find-file-noselect file))
      (when (numberp line)
        (goto-char (point-min))
        (forward-line (1- line))))))

(defun parley-open-location-click (event)
  "Open the file of the tool call location clicked on in EVENT."
  (interactive "e")
  (let ((position (event-end event)))
    (with-current-buffer (window-buffer (posn-window position))
      (parley-open-location (posn-point position)))))

(defun parley--edit-string (block diffs)
  "Return the transcript text of the edit BLOCK, whose DIFFS are ACP diffs.
One line, such as \"Edited app.py +3 −1\", whose body is the diff
\(and the error, when the edit failed)."
  (let* ((expanded (parley--block-expanded block))
         (status (parley--block-status block))
         (done (equal status "completed"))
         (root (bound-and-true-p parley--cwd))
         (header
          (lambda (text &optional face)
            (parley--props text 'parley-header block 'face (or face 'parley-tool-header))))
         (raw (parley--block-raw-output block))
         (output (and (not done) raw
                      ;; The error of the default rawOutput, {content, isError}.
                      (if (and (consp raw) (stringp (plist-get raw :content)))
                          (plist-get raw :content)
                        (parley--json-brief raw))))
         (body (concat
                (mapconcat (lambda (item)
                             (parley-diff-string (parley-diff-path item root)
                                                 (plist-get item :oldText)
                                                 (plist-get item :newText) "    "))
                           diffs "")
                (if output
                    (parley--props (concat "  output:\n"
                                           (parley--indent (parley--limit (string-trim-right output)))
                                           "\n")
                                   'face 'parley-tool-body)
                  ""))))
    (concat
     (funcall header (concat (string (if expanded parley--arrow-open parley--arrow-closed))
                             (if done " Edited" " Edit")))
     (mapconcat
      (lambda (item)
        (let ((stats (parley-diff-stats (plist-get item :oldText) (plist-get item :newText))))
          (concat (funcall header (concat " " (parley-diff-path item root) " "))
                  (funcall header (format "+%d" (car stats)) 'diff-added)
                  (funcall header " ")
                  (funcall header (format "−%d" (cdr stats)) 'diff-removed))))
      diffs (funcall header ","))
     (if done
         ""
       (let ((label (if (parley--block-superseded block)
                        '("superseded" . parley-tool-superseded)
                      (parley--status-label status))))
         (funcall header (concat " [" (car label) "]") (cdr label))))
     ;; The body starts on the header's newline, as a thought's does,
     ;; so that folded, the header is one line.
     (parley--props (concat "\n" (string-remove-suffix "\n" body))
                    'parley-body block
                    'invisible (unless expanded 'parley-hidden))
     (parley--props (string ?\n)))))

(defun parley--block-diffs (block)
  "Return the ACP diffs of the tool BLOCK: an edit's."
  (and (eq (parley--block-kind block) 'tool)
       (parley-diff-items (parley--block-content block))))

(defun parley--tool-string (block)
  "Return the transcript text of the tool BLOCK: a header and a body."
  (let ((diffs (parley--block-diffs block)))
    (if diffs
        (parley--edit-string block diffs)
      (parley--call-string block))))

(defun parley--result-summary (block)
  "Return the summary of the finished tool BLOCK's result, or nil.
The rule of docs/display.md, `parley-display-tool-summary'."
  (let ((status (parley--block-status block)))
    (when (member status '("completed" "failed"))
      (let ((text (mapconcat (lambda (item)
                               (let ((text (plist-get (plist-get item :content) :text)))
                                 (if (stringp text) (concat text "\n") "")))
                             (parley--block-content block) "")))
        (when (string-empty-p (string-trim text))
          (let ((raw (parley--block-raw-output block)))
            (setq text (cond ((stringp raw) raw)
                             ((and (consp raw) (stringp (plist-get raw :content)))
                              (plist-get raw :content))
                             (raw (parley--json-brief raw))
                             (t "")))))
        (parley-display-tool-summary text)))))

(defun parley--call-string (block)
  "Return the transcript text of the tool BLOCK that is not an edit.
The header is the title, the status and the file locations; the body,
folded unless the block is expanded, the input, content and output."
  (let* ((expanded (parley--block-expanded block))
         (superseded (parley--block-superseded block))
         (status (if superseded
                     '("superseded" . parley-tool-superseded)
                   (parley--status-label (parley--block-status block))))
         (title (car (split-string (or (parley--block-title block) "tool") "\n")))
         (title (truncate-string-to-width title 100 nil nil "…"))
         (body (parley--tool-body block)))
    (concat
     (parley--props (concat (string (if expanded parley--arrow-open parley--arrow-closed))
                            " " title " ")
                    'parley-header block
                    'face (if superseded 'parley-tool-superseded 'parley-tool-header))
     (apply #'parley--props (concat "[" (car status) "]")
            'parley-header block 'face (cdr status)
            (let ((summary (parley--result-summary block)))
              (and summary (list 'help-echo summary))))
     (parley--props (parley--locations-string block) 'parley-header block)
     (if (string-empty-p body)
         ""
       (parley--props body 'parley-body block
                      'invisible (unless expanded 'parley-hidden)))
     (parley--props (string ?\n)))))

(defun parley--tool-update (update)
  "Show the `tool_call' or `tool_call_update' UPDATE.
A field it has replaces the one shown; the others stay."
  (let* ((id (plist-get update :toolCallId))
         (block (gethash (cons 'tool id) parley--blocks))
         (new (null block)))
    (when new
      (parley--ensure-role 'agent)
      (parley--fold-thoughts)
      (setq block (parley--new-block 'tool id :status "pending")))
    (when (plist-member update :title)
      (setf (parley--block-title block) (plist-get update :title)))
    (when (plist-get update :status)
      (setf (parley--block-status block) (plist-get update :status)))
    (when (plist-member update :rawInput)
      (setf (parley--block-input block) (plist-get update :rawInput)))
    (when (plist-member update :content)
      (setf (parley--block-content block) (append (plist-get update :content) nil)))
    (when (plist-member update :locations)
      (setf (parley--block-locations block) (append (plist-get update :locations) nil)))
    (when (plist-member update :rawOutput)
      (setf (parley--block-raw-output block) (plist-get update :rawOutput)))
    ;; Superseded: the model did not make this call after all.
    (when (eq (parley--meta update :superseded) t)
      (setf (parley--block-superseded block) t))
    (if new
        (parley--append block (parley--tool-string block))
      (parley--replace block (parley--tool-string block)))
    (when (eq parley--tail block)
      (setq parley--tail nil))))

;;;; Tool call content: code, text and diffs

(defun parley--code-mode (title)
  "Return the major mode that fontifies the code of the tool TITLE, or nil."
  (let ((case-fold-search t))
    (cond ((string-match-p "lisp" title) #'emacs-lisp-mode)
          ((string-match-p "python" title) #'python-mode))))

(defconst parley--fontify-limit 50000
  "Longest code a question fontifies; longer code, shown plain, cannot stall Emacs.")

(defun parley--code-block (code mode)
  "Return CODE indented as a block, fontified by MODE when non-nil."
  (let ((code (copy-sequence (string-trim-right code "\n+"))))
    (when (and mode (<= (length code) parley--fontify-limit))
      (condition-case nil
          (pcase-dolist (`(,from ,to ,face) (parley-markdown-face-runs code mode))
            (put-text-property from to 'face face code))
        (error nil)))                   ; plain text is still the code
    (concat (parley--indent code) "\n")))

(defun parley--in-input-p (text input)
  "Return non-nil when TEXT is the value of a field of the tool INPUT."
  (and (consp input) (keywordp (car input))
       (cl-loop for (_key value) on input by #'cddr
                thereis (and (stringp value)
                             (equal (string-trim value) (string-trim text))))))

(defun parley--content-item-string (item input &optional mode limit)
  "Return the ACP tool call content ITEM as transcript text, in lines.
Text (the code of an evaluation, a tool's output) is a block,
fontified by MODE when non-nil; text already shown as a field of the
tool INPUT is not repeated.  A diff is shown in `diff-mode' faces.
With LIMIT, either is cut to `parley-tool-display-limit' characters."
  (let ((cut (if limit #'parley--limit #'identity)))
    (pcase (plist-get item :type)
      ("content"
       (let ((text (plist-get (plist-get item :content) :text)))
         (cond ((or (not (stringp text)) (string-empty-p (string-trim text))
                    (parley--in-input-p text input))
                "")
               (mode (parley--props (parley--code-block (funcall cut text) mode)))
               (t (parley--props (parley--code-block (funcall cut text) nil)
                                 'face 'parley-tool-body)))))
      ("diff"
       (funcall cut (parley--props (parley-diff-string
                                    (parley-diff-path item (bound-and-true-p parley--cwd))
                                    (plist-get item :oldText) (plist-get item :newText)
                                    "    "))))
      (_ ""))))

;;;; Usage

(cl-defstruct (parley--usage (:constructor parley--usage-create) (:copier nil))
  "The session's totals as the server reports them, for the header line.
IN and OUT are the session's tokens, COST its cost in USD and TURNS
its turns (nil while unknown); USED and SIZE are the context's tokens
and window.  The client never adds anything up: each report replaces."
  (in 0) (out 0) cost turns used size)

(defvar-local parley--usage nil
  "This buffer's `parley--usage'; only `parley--record-usage' changes it.")

(defun parley--record-usage (source data)
  "Record in this buffer's usage what SOURCE reports in DATA.
SOURCE is one of:
  `round'    DATA is a `usage_update': the context's fill and window,
             the session's cost, and the session's totals in
             `_meta.parley.session' (the call's own usage, `call', is
             not needed);
  `totals'   DATA is the session's totals (`UsageTotals'), from a
             prompt's or a load's result.
Token counts missing from DATA count as zero; a cost or turn count
that is not a number leaves the known one."
  (let ((usage (or parley--usage (setq parley--usage (parley--usage-create)))))
    (pcase-exhaustive source
      ('round
       (let ((size (plist-get data :size))
             (totals (parley--meta data :session)))
         (setf (parley--usage-used usage) (plist-get data :used)
               (parley--usage-size usage) (and (numberp size) size))
         (when totals
           (parley--record-usage 'totals totals))))
      ('totals
       (setf (parley--usage-in usage) (or (plist-get data :inputTokens) 0)
             (parley--usage-out usage) (or (plist-get data :outputTokens) 0))
       (when (natnump (plist-get data :turns))
         (setf (parley--usage-turns usage) (plist-get data :turns)))))
    ;; `cost' is the session's total in both shapes.
    (let ((cost (plist-get data :cost)))
      (when (numberp (plist-get cost :amount))
        (setf (parley--usage-cost usage) (plist-get cost :amount))))
    (force-mode-line-update)))

;;;; Updates

(defun parley--meta (update key)
  "Return KEY of UPDATE's `_meta.parley' object."
  (plist-get (plist-get (plist-get update :_meta) :parley) key))

(defun parley--content-text (content)
  "Return the text of a ContentBlock CONTENT."
  (pcase (plist-get content :type)
    ("text" (or (plist-get content :text) ""))
    ("resource" (let ((resource (plist-get content :resource)))
                  (format "[context: %s]\n" (or (plist-get resource :uri) "resource"))))
    ("resource_link" (format "[context: %s]\n" (plist-get content :uri)))
    (_ "")))

(defun parley--on-message (update)
  "Show the `agent_message_chunk' UPDATE."
  (let* ((text (parley--content-text (plist-get update :content)))
         (id (plist-get update :messageId))
         (replaces (parley--meta update :replaces))
         (old (and replaces (gethash (cons 'message replaces) parley--blocks))))
    (parley--fold-thoughts)
    (cond
     (old
      ;; A revision: the synchronous call's text replaces what streamed.
      (when (parley--block-markdown old)
        (parley-markdown-forget (parley--block-markdown old))
        (setf (parley--block-markdown old) nil))
      (parley--replace old (parley--props text))
      (parley--start-markdown old)
      (unless (eq old parley--tail)
        (parley--finish-markdown old))
      (when id (puthash (cons 'message id) old parley--blocks)))
     ((string-empty-p text))
     ((and parley--tail
           (eq (parley--block-kind parley--tail) 'message)
           (or (null id) (equal id (parley--block-id parley--tail))))
      (parley--extend parley--tail text)
      (parley--advance-markdown parley--tail text))
     (t
      (parley--ensure-role 'agent)
      (let ((block (parley--new-block 'message id)))
        (parley--start-markdown block)
        (parley--append block (parley--props text))
        (parley--advance-markdown block text))))
    ;; A replayed answer cut short by an error: the mark its turn ended
    ;; with.  A turn that stopped otherwise is marked by its replayed
    ;; notice, which follows.
    (when (equal (parley--meta update :stopReason) "failed")
      (parley--insert-notice "Error: the turn failed here" 'parley-error))))

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

(defun parley--on-thought (update)
  "Show the `agent_thought_chunk' UPDATE."
  (let ((text (parley--content-text (plist-get update :content)))
        (id (plist-get update :messageId)))
    (unless (string-empty-p text)
      ;; A new section ends its header with the body's first character,
      ;; a newline carrying the body's properties, which text inherits.
      (parley--extend (if (and parley--tail
                               (eq (parley--block-kind parley--tail) 'thought)
                               (or (null id) (equal id (parley--block-id parley--tail))))
                          parley--tail
                        (parley--ensure-role 'agent)
                        (parley--start-thought id))
                      text))))

(defun parley--on-user-chunk (update)
  "Show the `user_message_chunk' UPDATE (a replayed prompt)."
  (let ((text (parley--content-text (plist-get update :content)))
        (id (plist-get update :messageId)))
    (unless (string-empty-p text)
      (if (and parley--tail
               (eq (parley--block-kind parley--tail) 'user)
               (or (null id) (equal id (parley--block-id parley--tail))))
          (parley--extend parley--tail text)
        ;; Another prompt (two in a row when a turn failed early): its
        ;; own label.
        (when (eq parley--role 'user)
          (setq parley--role nil))
        (parley--ensure-role 'user)
        (parley--append (parley--new-block 'user id)
                        (parley--props text 'face 'parley-user-text))))))

(defconst parley--notice-faces
  '(("info" . parley-notice) ("warning" . parley-warning) ("error" . parley-error))
  "The face of a notice of each level (`_meta.parley.notice.level').")

(defun parley--notice-face (update)
  "Return the face of the notice chunk UPDATE, by its level.
An unknown level is shown as `info' is."
  (let ((notice (parley--meta update :notice)))
    (or (and (consp notice)
             (cdr (assoc (plist-get notice :level) parley--notice-faces)))
        'parley-notice)))

(defun parley--on-notice (update)
  "Show the notice chunk UPDATE: Parley about the turn, not the answer.
The server's words (why the turn stopped, a budget...), shown once,
where it comes, in the face of its level; never as answer text."
  (let ((text (string-trim-right (parley--content-text (plist-get update :content)))))
    (parley--fold-thoughts)
    (unless (string-empty-p text)
      (parley--insert-notice text (parley--notice-face update)))))

(defun parley--update (update)
  "Show the `session/update' UPDATE in the current chat buffer."
  (pcase (plist-get update :sessionUpdate)
    ((and "agent_message_chunk" (guard (parley--meta update :notice)))
     (parley--on-notice update))
    ("agent_message_chunk" (parley--on-message update))
    ("agent_thought_chunk" (parley--on-thought update))
    ("user_message_chunk" (parley--on-user-chunk update))
    ((or "tool_call" "tool_call_update") (parley--tool-update update))
    ("usage_update" (parley--record-usage 'round update))
    ("session_info_update"
     (when (plist-get update :title)
       (setq parley--title (plist-get update :title))
       (force-mode-line-update)))))

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
