CREATE SCHEMA "execution";
--> statement-breakpoint
CREATE TABLE "execution"."attempts" (
	"id" text PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"number" integer NOT NULL,
	"backend" text NOT NULL,
	"model_family" text NOT NULL,
	"agent_id" text,
	"decision_id" text NOT NULL,
	"state" text NOT NULL,
	"output" text DEFAULT '' NOT NULL,
	"error" text,
	"cost_micro_usd" bigint DEFAULT 0 NOT NULL,
	"input_tokens" bigint DEFAULT 0 NOT NULL,
	"output_tokens" bigint DEFAULT 0 NOT NULL,
	"latency_ms" bigint DEFAULT 0 NOT NULL,
	"verdict" jsonb,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "execution"."explanation_entries" (
	"task_id" text NOT NULL,
	"position" integer NOT NULL,
	"step" text NOT NULL,
	"attempt" integer NOT NULL,
	"message" text NOT NULL,
	"backend" text,
	"decision_id" text,
	"detail" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "explanation_entries_task_id_position_pk" PRIMARY KEY("task_id","position")
);
--> statement-breakpoint
CREATE TABLE "execution"."task_events" (
	"task_id" text NOT NULL,
	"seq" bigint NOT NULL,
	"kind" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_events_task_id_seq_pk" PRIMARY KEY("task_id","seq")
);
--> statement-breakpoint
CREATE TABLE "execution"."tasks" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"request_id" text,
	"state" text NOT NULL,
	"input" text NOT NULL,
	"mode" text NOT NULL,
	"per_task_micro_usd" bigint NOT NULL,
	"per_day_micro_usd" bigint NOT NULL,
	"result" text,
	"error_code" text,
	"error_message" text,
	"cost_micro_usd" bigint DEFAULT 0 NOT NULL,
	"classification" jsonb,
	"agent_id" text,
	"backends" jsonb NOT NULL,
	"capabilities" jsonb NOT NULL,
	"workspace" jsonb,
	"verify" jsonb NOT NULL,
	"webhooks" jsonb NOT NULL,
	"attachments" jsonb NOT NULL,
	"cancel_requested_by" text,
	"cancel_requested_at" timestamp with time zone,
	"claimed_by" text,
	"claim_expires_at" timestamp with time zone,
	"runs" integer DEFAULT 0 NOT NULL,
	"last_event_seq" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "execution"."attempts" ADD CONSTRAINT "attempts_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "execution"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "execution"."explanation_entries" ADD CONSTRAINT "explanation_entries_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "execution"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "execution"."task_events" ADD CONSTRAINT "task_events_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "execution"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "attempts_task_number" ON "execution"."attempts" USING btree ("task_id","number");--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_project_request_id" ON "execution"."tasks" USING btree ("project_id","request_id");--> statement-breakpoint
CREATE INDEX "tasks_project_created" ON "execution"."tasks" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "tasks_claimable" ON "execution"."tasks" USING btree ("created_at") WHERE state in ('queued', 'running', 'verifying');