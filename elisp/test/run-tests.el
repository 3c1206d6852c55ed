;;; run-tests.el --- Run the Parley ERT suites in batch  -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -L DIR -l run-tests.el RESULT-FILE
;; Runs the unit and integration tests and writes "P F S" (passed,
;; failed, skipped) to RESULT-FILE; exits non-zero when a test failed.
;; Each test fails past its time limit (PARLEY_ERT_TIMEOUT seconds,
;; default 120: parley-test-timeout.el), with the stack it waited in.

;;; Code:

(require 'ert)
(require 'cl-lib)
(setq load-prefer-newer t)
(let ((here (file-name-directory (or load-file-name buffer-file-name))))
  (add-to-list 'load-path here)
  (load (expand-file-name "parley-test" here) nil t)
  (load (expand-file-name "parley-session-test" here) nil t)
  (load (expand-file-name "parley-tools-test" here) nil t)
  (load (expand-file-name "parley-question-test" here) nil t)
  (load (expand-file-name "parley-edits-test" here) nil t)
  (load (expand-file-name "parley-display-test" here) nil t)
  (load (expand-file-name "parley-markdown-test" here) nil t)
  (load (expand-file-name "parley-structure-test" here) nil t)
  (load (expand-file-name "parley-wire-test" here) nil t)
  (load (expand-file-name "parley-integration-test" here) nil t)
  (load (expand-file-name "parley-integration-markdown-test" here) nil t)
  (load (expand-file-name "parley-modes-test" here) nil t)
  (load (expand-file-name "parley-terminals-test" here) nil t)
  (load (expand-file-name "parley-daily-test" here) nil t)
  (load (expand-file-name "parley-papercuts-test" here) nil t)
  (load (expand-file-name "parley-windows-test" here) nil t)
  (load (expand-file-name "parley-install-test" here) nil t)
  (load (expand-file-name "parley-package-test" here) nil t)
  (load (expand-file-name "parley-integration-daily-test" here) nil t)
  (load (expand-file-name "parley-retry-test" here) nil t)
  (load (expand-file-name "parley-version-test" here) nil t)
  (load (expand-file-name "parley-integration-retry-test" here) nil t)
  (load (expand-file-name "parley-integration-kernel-test" here) nil t)
  (load (expand-file-name "parley-test-timeout-test" here) nil t))
(require 'parley-test-timeout)
(parley-test-timeout-all)

(let* ((result-file (car command-line-args-left))
       (stats (ert-run-tests-batch t))
       (passed 0) (failed 0) (skipped 0))
  (setq command-line-args-left nil)
  (cl-loop for test across (ert--stats-tests stats)
           for result across (ert--stats-test-results stats)
           do (cond ((ert-test-skipped-p result)
                     (cl-incf skipped)
                     (message "SKIPPED %s: %s" (ert-test-name test)
                              (let ((c (ert-test-result-with-condition-condition result)))
                                (if (stringp (cadr c)) (cadr c) c))))
                    ((ert-test-result-expected-p test result) (cl-incf passed))
                    (t (cl-incf failed))))
  (when result-file
    (with-temp-file result-file (insert (format "%d %d %d\n" passed failed skipped))))
  (kill-emacs (if (zerop failed) 0 1)))

;;; run-tests.el ends here
