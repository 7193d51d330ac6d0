CREATE SCHEMA "placement";
--> statement-breakpoint
CREATE TABLE "placement"."decisions" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"request_id" text,
	"task_id" text NOT NULL,
	"task_class" text NOT NULL,
	"decision" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "placement"."incumbents" (
	"project_id" text NOT NULL,
	"task_class" text NOT NULL,
	"mode" text NOT NULL,
	"purpose" text NOT NULL,
	"backend" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "incumbents_project_id_task_class_mode_purpose_pk" PRIMARY KEY("project_id","task_class","mode","purpose")
);
--> statement-breakpoint
CREATE TABLE "placement"."outcome_reports" (
	"request_id" text PRIMARY KEY NOT NULL,
	"backend" text NOT NULL,
	"task_class" text NOT NULL,
	"decision_id" text DEFAULT '' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "placement"."signals" (
	"backend" text NOT NULL,
	"task_class" text NOT NULL,
	"samples" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"verified_successes" bigint DEFAULT 0 NOT NULL,
	"work_samples" bigint DEFAULT 0 NOT NULL,
	"latencies_ms" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"cost_samples" bigint DEFAULT 0 NOT NULL,
	"total_cost_micro_usd" bigint DEFAULT 0 NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"opened_at" timestamp with time zone,
	"probe_started_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "signals_backend_task_class_pk" PRIMARY KEY("backend","task_class")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "decisions_project_request_idx" ON "placement"."decisions" USING btree ("project_id","request_id");