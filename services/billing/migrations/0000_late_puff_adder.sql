CREATE SCHEMA "billing";
--> statement-breakpoint
CREATE TABLE "billing"."day_spend" (
	"project_id" text NOT NULL,
	"day" text NOT NULL,
	"held_micro_usd" bigint DEFAULT 0 NOT NULL,
	"spent_micro_usd" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "day_spend_project_id_day_pk" PRIMARY KEY("project_id","day")
);
--> statement-breakpoint
CREATE TABLE "billing"."reservations" (
	"id" text PRIMARY KEY NOT NULL,
	"request_id" text,
	"project_id" text NOT NULL,
	"task_id" text NOT NULL,
	"attempt_id" text NOT NULL,
	"amount_micro_usd" bigint NOT NULL,
	"state" text NOT NULL,
	"cost_micro_usd" bigint DEFAULT 0 NOT NULL,
	"day" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."task_spend" (
	"project_id" text NOT NULL,
	"task_id" text NOT NULL,
	"held_micro_usd" bigint DEFAULT 0 NOT NULL,
	"spent_micro_usd" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "task_spend_project_id_task_id_pk" PRIMARY KEY("project_id","task_id")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_samples" (
	"id" text PRIMARY KEY NOT NULL,
	"reservation_id" text NOT NULL,
	"project_id" text NOT NULL,
	"task_id" text NOT NULL,
	"attempt_id" text NOT NULL,
	"backend" text NOT NULL,
	"rate_card_revision" bigint NOT NULL,
	"input_tokens" bigint NOT NULL,
	"output_tokens" bigint NOT NULL,
	"duration_ms" bigint NOT NULL,
	"calls" bigint NOT NULL,
	"cost_micro_usd" bigint NOT NULL,
	"reported_cost_micro_usd" bigint DEFAULT 0 NOT NULL,
	"day" text NOT NULL,
	"flags" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "usage_samples_reservation_id_unique" UNIQUE("reservation_id")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "reservations_request_id_key" ON "billing"."reservations" USING btree ("request_id");--> statement-breakpoint
CREATE INDEX "reservations_held_expiry_idx" ON "billing"."reservations" USING btree ("expires_at") WHERE "billing"."reservations"."state" = 'held';--> statement-breakpoint
CREATE INDEX "usage_samples_project_day_idx" ON "billing"."usage_samples" USING btree ("project_id","day");--> statement-breakpoint
CREATE INDEX "usage_samples_project_task_idx" ON "billing"."usage_samples" USING btree ("project_id","task_id");